"""The engine stand-in keeps the engine contract (the engine's documented behaviour, restated in docs/rank_container.md): command line, two ranks,
messages, memory refusals and the HTTP API. Runs the stand-in as real processes on loopback."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_process import ENGINE, free_port, rank_folders  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".cache", "collections"))
from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args  # noqa: E402  pylint: disable=wrong-import-position
AUTH_BODY = ('{"error":{"message":"A valid API key is required","type":"invalid_request_error",'
             '"param":null,"code":"invalid_api_key"}}')


@pytest.fixture
def box(tmp_path):
    kernels, model = rank_folders(tmp_path)
    env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(kernels), TENSORFOLD_KV_PAGES="1",
               TENSORFOLD_STANDIN_LOAD_S="0.2", TENSORFOLD_STANDIN_TOKENS_PER_S="500",
               TENSORFOLD_MEMORY_RESERVE_GIB="4")
    env.pop("TENSORFOLD_API_KEY", None)
    return {"tmp": tmp_path, "model": str(model), "env": env, "procs": []}


@pytest.fixture(autouse=True)
def reap(box):
    yield
    for proc in box["procs"]:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def run(args, env):
    return subprocess.run([sys.executable, ENGINE] + args, env=env, capture_output=True, text=True, timeout=30,
                          check=False)


def start_rank(box, rank, master_port, extra=(), env=None):
    log = open(str(box["tmp"] / ("rank%d.log" % rank)), "w")
    args = [sys.executable, ENGINE, "serve", box["model"], "--tp", "2", "--rank", str(rank),
            "--master", "127.0.0.1", "--master-port", str(master_port)] + list(extra)
    proc = subprocess.Popen(args, env=env or box["env"], stdout=log, stderr=subprocess.STDOUT)
    box["procs"].append(proc)
    return proc


def read_log(box, rank):
    return (box["tmp"] / ("rank%d.log" % rank)).read_text()


def wait_for(predicate, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def http(url, data=None, headers=None):
    request = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                     headers=dict(headers or {}, **({"Content-Type": "application/json"} if data else {})))
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def start_pair(box, extra0=(), extra1=(), env=None):
    master, port = free_port(), free_port()
    r1 = start_rank(box, 1, master, extra1, env)
    r0 = start_rank(box, 0, master, ["--port", str(port), "--host", "127.0.0.1"] + list(extra0), env)
    base = "http://127.0.0.1:%d" % port
    assert wait_for(lambda: "serving " in read_log(box, 0) or r0.poll() is not None), read_log(box, 0)
    return r0, r1, base, master


def test_version_and_capabilities(box):
    out = run(["--version"], box["env"])
    assert out.returncode == 0 and out.stdout.startswith("tensorfold-native ")
    caps = json.loads(run(["capabilities", "--json"], box["env"]).stdout)
    assert "fp8" in caps["kv_dtype"]


@pytest.mark.parametrize("flags", [
    ["--parallel", "0"], ["--parallel", "9"], ["--kv-dtype", "int4"], ["--reasoning-effort", "huge"],
    ["--tp", "2", "--rank", "0", "--master", "localhost", "--master-port", "29583"], ["--bogus"],
])
def test_bad_flags_print_usage_and_exit_2(box, flags):
    out = run(["serve", "/nonexistent/argument-check"] + flags, box["env"])
    assert out.returncode == 2
    assert "usage: tensorfold-native" in out.stderr


def test_bad_head_packing_in_environment_is_a_flag_error(box):
    out = run(["serve", "/nonexistent/argument-check"], dict(box["env"], TENSORFOLD_HEAD="q2"))
    assert out.returncode == 2 and "TENSORFOLD_HEAD" in out.stderr


@pytest.mark.parametrize("names,weights", [(None, "81.2"), ({"head": "TF_GLM_HEAD"}, "80.3")])
def test_a_build_reading_another_name_gets_the_setting_only_under_the_operators_name(box, names, weights):
    # This build reads HEAD as TF_GLM_HEAD (the stand-in's knob_names switch). The collection's
    # default name is then ignored, as an unknown variable is (bf16's 1.2 GiB head), until
    # tensorfold_engine_names sends the setting under the build's name (q4's 0.3 GiB).
    settings = {"tensorfold_head": "q4"}
    if names:
        settings["tensorfold_engine_names"] = names
    env = dict(box["env"], TENSORFOLD_STANDIN_KNOB_NAMES=json.dumps({"head": "TF_GLM_HEAD"}),
               TENSORFOLD_STANDIN_GPU_FREE_GIB="60", **engine_args.engine_env(settings))
    out = run(["serve", box["model"], "--context", "65536"], env)
    # 76 model + 3 dense (q8) + the head + 1.0 mtp
    assert out.returncode == 1 and "the checkpoint's %s GiB of weights do not fit" % weights in out.stdout


def test_argument_check_accepts_good_flags_with_exit_1(box):
    out = run(["serve", "/nonexistent/argument-check", "--parallel", "auto", "--context", "1048576",
               "--kv-dtype", "fp8", "--tp", "2", "--rank", "0", "--master", "127.0.0.1",
               "--master-port", "29583", "--vision"], box["env"])
    assert out.returncode == 1
    assert "tensorfold: /nonexistent/argument-check is neither a directory nor a Hugging Face repo id" in out.stdout


def test_missing_kernel_set_is_a_load_failure(box):
    env = dict(box["env"], TENSORFOLD_CUDA_KERNELS="/nowhere")
    out = run(["serve", box["model"]], env)
    assert out.returncode == 1 and "tensorfold: no CUDA kernel set for sm_120 at /nowhere" in out.stdout


def test_api_key_file_must_be_mode_600(box):
    key = box["tmp"] / "key"
    key.write_text("canary-secret-123")
    os.chmod(str(key), 0o644)
    out = run(["serve", box["model"], "--api-key-file", str(key)], box["env"])
    assert out.returncode == 1 and "must be mode 600" in out.stdout


def test_two_ranks_meet_agree_and_serve(box):
    r0, r1, base, master = start_pair(box, ["--context", "65536", "--vision"], ["--context", "65536", "--vision"])
    log0, log1 = read_log(box, 0), read_log(box, 1)
    assert "rank 0: waiting for rank 1 on 127.0.0.1:%d" % master in log0
    assert "rank 1: joining rank 0 at 127.0.0.1:%d" % master in log1
    assert "rank 0: settings agreed, NCCL joined" in log0
    assert wait_for(lambda: "rank 1: settings agreed, NCCL joined" in read_log(box, 1))
    assert "4 streams at once" in log0 and "65536-token window" in log0
    assert "warning: non-loopback" not in log0
    status, unused_headers, body = http(base + "/health")
    health = json.loads(body)
    assert status == 200 and health["live"]["connections"] == 0 and health["max_batch_size"] == 4
    status, unused_headers, body = http(base + "/v1/models")
    assert json.loads(body)["data"][0] == {"id": "GLM-5.3-Flash", "object": "model",
                                           "created": json.loads(body)["data"][0]["created"], "owned_by": "tensorfold"}
    status, unused_headers, body = http(base + "/nope")
    assert status == 404 and body == '{"error":{"message":"unknown path /nope"}}'


def test_chat_is_deterministic_streamed_or_not_and_takes_images(box):
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536", "--vision"], ["--context", "65536", "--vision"])
    request = {"model": "GLM-5.3-Flash", "messages": [{"role": "user", "content": "Say hi"}],
               "temperature": 0, "max_tokens": 64}
    first = json.loads(http(base + "/v1/chat/completions", request)[2])
    second = json.loads(http(base + "/v1/chat/completions", request)[2])
    text = first["choices"][0]["message"]["content"]
    assert text and text == second["choices"][0]["message"]["content"]
    status, headers, body = http(base + "/v1/chat/completions",
                                 dict(request, stream=True, stream_options={"include_usage": True}))
    events = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == text
    assert chunks[-1]["usage"]["completion_tokens"] == len(text.split())
    image = {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}
    status, unused_headers, body = http(base + "/v1/chat/completions", dict(request, messages=[image]))
    assert status == 200 and "image" in json.loads(body)["choices"][0]["message"]["content"]


def test_auth_401_body_and_health_without_key(box):
    key = box["tmp"] / "key"
    key.write_text("canary-secret-123\n")
    os.chmod(str(key), 0o600)
    extra = ["--context", "65536", "--api-key-file", str(key)]
    r0, r1, base, unused_master = start_pair(box, extra, ["--context", "65536"])
    assert http(base + "/health")[2] == '{"status":"ok"}'
    status, headers, body = http(base + "/v1/models")
    assert status == 401 and body == AUTH_BODY and headers["WWW-Authenticate"] == "Bearer"
    assert http(base + "/v1/models", headers={"Authorization": "Bearer canary-secret-123"})[0] == 200
    assert http(base + "/v1/models", headers={"x-api-key": "canary-secret-123"})[0] == 200
    assert http(base + "/metrics")[0] == 401


@pytest.mark.parametrize("reading,text,served", [("trim", "canary-secret-123\n", True),
                                                  ("verbatim", "canary-secret-123\n", False),
                                                  ("verbatim", "canary-secret-123", True)])
def test_key_file_switch(monkeypatch, tmp_path, reading, text, served):
    import tensorfold_native  # pylint: disable=import-outside-toplevel
    key = tmp_path / "key"
    key.write_text(text)
    os.chmod(str(key), 0o600)
    monkeypatch.setenv("TENSORFOLD_STANDIN_KEY_FILE", reading)
    monkeypatch.delenv("TENSORFOLD_API_KEY", raising=False)
    args = tensorfold_native.build_parser().parse_args(["serve", str(tmp_path), "--api-key-file", str(key)])
    assert ("canary-secret-123" in tensorfold_native.api_keys(args)) is served


def test_open_non_loopback_server_warns(box):
    master, port = free_port(), free_port()
    start_rank(box, 1, master, ["--context", "65536"])
    start_rank(box, 0, master, ["--context", "65536", "--host", "0.0.0.0", "--port", str(port)])
    assert wait_for(lambda: "serving " in read_log(box, 0))
    assert "warning: non-loopback server has no API key; requests are open" in read_log(box, 0)


@pytest.mark.parametrize("reading,ends", [("env", True), ("fixed", False)])
def test_the_join_wait_is_ten_minutes_or_tf_tp_timeout_s_by_the_switch(box, reading, ends):
    # The contract names both: a 10-minute wait, and TF_TP_TIMEOUT_S (default 300 s).
    env = dict(box["env"], TENSORFOLD_STANDIN_JOIN_WAIT=reading, TENSORFOLD_STANDIN_JOIN_WAIT_S="30",
               TF_TP_TIMEOUT_S="1")
    r0 = start_rank(box, 0, free_port(), ["--context", "65536", "--port", str(free_port())], env)
    if ends:
        assert r0.wait(10) == 3
        assert "rank 0: rank 1 did not join within 1 s; exiting" in read_log(box, 0)
    else:
        time.sleep(2.5)
        assert r0.poll() is None, read_log(box, 0)


def test_tf_tp_timeout_s_defaults_to_300_s(monkeypatch):
    import tensorfold_native  # pylint: disable=import-outside-toplevel
    monkeypatch.delenv("TF_TP_TIMEOUT_S", raising=False)
    config = dict(tensorfold_native.DEFAULTS)
    assert tensorfold_native.join_wait(config) == 600
    assert tensorfold_native.join_wait(dict(config, join_wait="env")) == 300
    monkeypatch.setenv("TF_TP_TIMEOUT_S", "45")
    assert tensorfold_native.join_wait(dict(config, join_wait="env")) == 45


def test_settings_mismatch_stops_both_ranks(box):
    master = free_port()
    r1 = start_rank(box, 1, master, ["--context", "131072"])
    r0 = start_rank(box, 0, master, ["--context", "65536", "--port", str(free_port())])
    assert r0.wait(15) == 1 and r1.wait(15) == 1
    assert "the other rank's settings differ (see its log)" in read_log(box, 0)
    assert read_log(box, 0).count('rank 0 loads with "checkpoint=') == 1
    assert 'rank 1 loads with "checkpoint=' in read_log(box, 1)


def test_rank_1_killed_with_no_stream_open_makes_rank_0_exit_0(box):
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536"], ["--context", "65536"])
    r1.send_signal(signal.SIGKILL)
    assert r0.wait(10) == 0
    assert "rank 0: rank 1 closed the control link; exiting" in read_log(box, 0)


def test_rank_1_killed_with_a_stream_open_makes_rank_0_exit_3(box):
    env = dict(box["env"], TENSORFOLD_STANDIN_TOKENS_PER_S="2")
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536"], ["--context", "65536"], env=env)
    import threading
    threading.Thread(target=http, args=(base + "/v1/chat/completions",
                                        {"model": "GLM-5.3-Flash", "max_tokens": 50, "stream": True,
                                         "messages": [{"role": "user", "content": "hi"}]}), daemon=True).start()
    assert wait_for(lambda: '"connections":1' in http(base + "/health")[2])
    r1.send_signal(signal.SIGKILL)
    assert r0.wait(10) == 3


@pytest.mark.parametrize("reading,status", [("none", 0), ("shared", 3)])
def test_rank_0_killed_with_a_stream_open_makes_rank_1_exit_by_the_switch(box, reading, status):
    # The contract: exit 3, or 0 if no stream was open. Whether rank 1 (no HTTP, but a share of
    # every stream's work) counts rank 0's streams is not said: the switch gives both.
    env = dict(box["env"], TENSORFOLD_STANDIN_TOKENS_PER_S="2", TENSORFOLD_STANDIN_RANK1_STREAMS=reading)
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536"], ["--context", "65536"], env=env)
    import threading
    threading.Thread(target=http, args=(base + "/v1/chat/completions",
                                        {"model": "GLM-5.3-Flash", "max_tokens": 50, "stream": True,
                                         "messages": [{"role": "user", "content": "hi"}]}), daemon=True).start()
    assert wait_for(lambda: '"connections":1' in http(base + "/health")[2])
    time.sleep(0.2)
    r0.send_signal(signal.SIGKILL)
    assert r1.wait(10) == status
    assert "rank 1: rank 0 closed the control link; exiting" in read_log(box, 1)


def test_rank_0_killed_with_no_stream_open_makes_rank_1_exit_0_either_way(box):
    env = dict(box["env"], TENSORFOLD_STANDIN_RANK1_STREAMS="shared")
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536"], ["--context", "65536"], env=env)
    assert json.loads(http(base + "/v1/chat/completions", {"max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"}]})[2])["choices"]
    r0.send_signal(signal.SIGKILL)
    assert r1.wait(10) == 0


def test_fault_injection_kills_rank_1_after_start(box):
    env = dict(box["env"], TENSORFOLD_STANDIN_FAIL_RANK="1", TENSORFOLD_STANDIN_FAIL_AFTER_S="0.5")
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536"], ["--context", "65536"], env=env)
    assert r1.wait(10) == -signal.SIGKILL
    assert r0.wait(10) == 0  # no stream was open


def test_sigterm_stops_the_rank_and_the_other_follows(box):
    r0, r1, base, unused_master = start_pair(box, ["--context", "65536"], ["--context", "65536"])
    r0.send_signal(signal.SIGTERM)
    assert r0.wait(10) == 0
    assert "tensorfold: stop signal: this rank exits, the other follows" in read_log(box, 0)
    assert r1.wait(10) == 0
    assert "rank 1: rank 0 closed the control link; exiting" in read_log(box, 1)


def test_window_refusal_word_for_word(box):
    env = dict(box["env"], TENSORFOLD_STANDIN_GPU_FREE_GIB="94.5", TENSORFOLD_STANDIN_MODEL_GIB="76.0")
    r0, r1, base, unused_master = start_pair(
        box, ["--context", "1048576", "--vision", "--drafter", "/d"],
        ["--context", "1048576", "--vision", "--drafter", "/d"], env=env)
    assert r0.wait(10) == 1
    # 94.5 - 4 reserve - (76 + 3 dense + 1.2 head + 1.8 vision + 2.5 drafter) = 6.0 GiB; 8 GiB a 1M window.
    assert ("tensorfold: the CUDA memory budget fits no stream: one at a 1048576-token window takes 8.00 GiB, "
            "and 6.00 GiB is left after the model's 84.50 GiB and the 4.0 GiB reserve; lower --context, "
            "or free device memory") in read_log(box, 0)


@pytest.mark.parametrize("pages", ["0", "1"])
def test_parallel_refusal_with_pages_off_and_on(box, pages):
    # The contract: with shared pages too, --parallel P is admitted only when P streams fit.
    env = dict(box["env"], TENSORFOLD_KV_PAGES=pages)
    r0, r1, base, unused_master = start_pair(
        box, ["--context", "524288", "--parallel", "4"], ["--context", "524288", "--parallel", "4"], env=env)
    assert r0.wait(10) == 1
    # 94.5 - 4 - (76 + 3 + 1.2 + 1.0 mtp) = 9.30 GiB left; 4 GiB a stream at 512Ki tokens.
    assert ("tensorfold: --parallel 4 needs 16.00 GiB for its streams at a 524288-token window, and the CUDA "
            "memory budget leaves 9.30 GiB: serve --parallel 2, or lower --context") in read_log(box, 0)


def test_weights_and_model_window_refusals(box):
    out = run(["serve", box["model"], "--context", "65536"], dict(box["env"], TENSORFOLD_STANDIN_GPU_FREE_GIB="60"))
    assert out.returncode == 1
    assert ("tensorfold: the checkpoint's 81.2 GiB of weights do not fit the 56.0 GiB the CUDA memory budget grants "
            "(60.0 GiB free less a 4.0 GiB reserve); free device memory or adjust TENSORFOLD_MEMORY_RESERVE_GIB / "
            "TENSORFOLD_CUDA_MEMORY_LIMIT_GB") in out.stdout
    out = run(["serve", box["model"], "--context", "2000000"], box["env"])
    assert out.returncode == 1
    assert "tensorfold: --context 2000000 exceeds this model's 1048576-token window" in out.stdout


def test_fewer_streams_on_pages_show_in_the_startup_line(box):
    # The switch for an engine build that admits fewer streams than asked with shared pages.
    env = dict(box["env"], TENSORFOLD_STANDIN_GPU_FREE_GIB="94.5", TENSORFOLD_STANDIN_PAGED_PARALLEL="admit")
    r0, r1, base, unused_master = start_pair(
        box, ["--context", "524288", "--parallel", "4"], ["--context", "524288", "--parallel", "4"], env=env)
    assert "2 streams at once, 4.00 GiB each at a 524288-token window" in read_log(box, 0)
