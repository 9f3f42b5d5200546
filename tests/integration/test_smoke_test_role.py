"""The smoke_test role end to end against the engine stand-in, run as two local ranks.

The engine stand-in (tests/standins/engine/tensorfold_native.py, written for the rank_container
role) keeps the engine contract's HTTP API. Here both ranks run as local processes on 127.0.0.1
(--tp 2, the control link over loopback), and the role runs with connection local, so the
requests go exactly where they go on a host: from the host to its own API.

The stand-in is looked up in this checkout, or where GLM53_ENGINE_STANDIN points; a missing
stand-in fails the tests.
"""

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT, run_playbook  # noqa: E402

STANDIN = os.environ.get("GLM53_ENGINE_STANDIN") or os.path.join(ROOT, "tests", "standins", "engine", "tensorfold_native.py")
API_KEY = "smoke-canary-key-0451"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Engine(object):
    """Both ranks of the stand-in, as runner.sh starts them (rank 1 first, rank 0 serving)."""

    def __init__(self, work, api_key=None, vision=True, host="127.0.0.1"):
        self.work = work
        self.port = free_port()
        master = free_port()
        (work / "model").mkdir(exist_ok=True)
        (work / "kernels").mkdir(exist_ok=True)
        (work / "kernels" / "aot.json").write_text("{}")
        env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(work / "kernels"), TENSORFOLD_KV_PAGES="1",
                   TENSORFOLD_STANDIN_LOAD_S="0.2", TENSORFOLD_STANDIN_TOKENS_PER_S="2000", HF_HUB_OFFLINE="1")
        env.pop("TENSORFOLD_API_KEY", None)
        both = ["serve", str(work / "model"), "--tp", "2", "--master", "127.0.0.1", "--master-port", str(master),
                "--context", "65536", "--parallel", "2", "--no-drafts", "--no-thinking"] + (["--vision"] if vision else [])
        rank0 = ["--rank", "0", "--device", "0", "--host", host, "--port", str(self.port)]
        if api_key:
            key_file = work / "api-key"
            key_file.write_text(api_key)
            os.chmod(str(key_file), 0o600)
            rank0 += ["--api-key-file", str(key_file)]
        self.logs = [open(str(work / ("rank%d.log" % r)), "w") for r in (0, 1)]
        self.procs = [subprocess.Popen([sys.executable, STANDIN] + both + ["--rank", "1", "--device", "1"], env=env,
                                       stdout=self.logs[1], stderr=subprocess.STDOUT),
                      subprocess.Popen([sys.executable, STANDIN] + both + rank0, env=env,
                                       stdout=self.logs[0], stderr=subprocess.STDOUT)]
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen("http://%s:%d/health" % (host, self.port), timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the stand-in did not come up: %s" % (work / "rank0.log").read_text())

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in self.logs:
            log.close()


PLAYBOOK = textwrap.dedent("""\
    - name: Smoke-test the local engine
      hosts: all
      gather_facts: false
      roles:
        - role: glm53.tensorfold.smoke_test
    """)


def write_inventory(work, port, **extra):
    host_vars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "tensorfold_port": port, "tensorfold_data_dir": str(work / "data"),
                 "smoke_test_health_retries": 2, "smoke_test_health_delay": 1}
    host_vars.update(extra)
    (work / "hosts.json").write_text(json.dumps({"all": {"hosts": {"box": host_vars}}}))
    (work / "smoke.yml").write_text(PLAYBOOK)
    return work / "hosts.json"


def session_dir(work):
    folder = work / "data" / "logs" / "current"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    work = tmp_path_factory.mktemp("engine")
    running = Engine(work)
    yield running
    running.stop()


def test_live_line_models_and_smoke_json_and_a_second_run_changes_nothing(engine, tmp_path):
    logs = session_dir(tmp_path)
    inventory = write_inventory(tmp_path, engine.port)
    rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path)
    assert rc == 0, output
    assert "GLM-5.3-Flash-EXL3 is now LIVE! on port %d" % engine.port in output
    assert "endpoint: http://127.0.0.1:%d/v1" % engine.port in output or "endpoint: http://box:%d/v1" % engine.port in output
    models = json.loads((logs / "models.json").read_text())
    assert [m["id"] for m in models["data"]] == ["GLM-5.3-Flash"]
    smoke = json.loads((logs / "smoke.json").read_text())
    assert smoke["status"] == "live" and smoke["reply"].strip()
    assert [c["name"] for c in smoke["checks"]] == ["health", "models", "chat", "vision"]
    rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path)
    assert rc == 0 and "changed=0" in output, output


def test_wrong_served_name_fails_with_e_smoke_naming_what_is_served(engine, tmp_path):
    session_dir(tmp_path)
    inventory = write_inventory(tmp_path, engine.port, tensorfold_served_name="GLM-5.3-Flash-Other")
    rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path)
    assert rc != 0
    assert "[E_SMOKE] box: /v1/models does not list GLM-5.3-Flash-Other (it lists GLM-5.3-Flash)" in output
    smoke = json.loads((tmp_path / "data" / "logs" / "current" / "smoke.json").read_text())
    assert smoke["status"] == "failed"


def test_no_engine_is_e_api_with_the_connection_error(tmp_path):
    inventory = write_inventory(tmp_path, free_port())
    rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path)
    assert rc != 0
    assert "[E_API] box: http://127.0.0.1:" in output and "Connection refused" in output
    assert "were not saved" in output  # no session folder: nothing written outside it


def test_api_key_is_enforced_checked_and_never_printed(tmp_path):
    keyed = Engine(tmp_path, api_key=API_KEY, vision=False)
    try:
        session_dir(tmp_path)
        inventory = write_inventory(tmp_path, keyed.port, tensorfold_api_key=API_KEY, tensorfold_vision=False)
        rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path, extra_args=["-v"])
        assert rc == 0, output
        assert "is now LIVE!" in output
        assert API_KEY not in output
        smoke_text = (tmp_path / "data" / "logs" / "current" / "smoke.json").read_text()
        assert API_KEY not in smoke_text
        assert [c["name"] for c in json.loads(smoke_text)["checks"]] == ["health", "models", "chat", "without_key", "with_key"]
        # Without the key configured, the same engine refuses the smoke requests: E_SMOKE quoting the 401.
        inventory = write_inventory(tmp_path, keyed.port, tensorfold_vision=False)
        rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path)
        assert rc != 0 and "[E_SMOKE]" in output and "invalid_api_key" in output
    finally:
        keyed.stop()


def test_check_mode_sends_nothing_and_lists_the_requests(tmp_path):
    inventory = write_inventory(tmp_path, 8020, tensorfold_api_key=API_KEY)
    rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path, extra_args=["--check"])
    assert rc == 0, output
    assert "GET http://127.0.0.1:8020/health" in output
    assert "without a key: expects 401" in output
    assert "is now LIVE!" not in output and API_KEY not in output


def test_a_smoke_run_on_its_own_reaches_an_engine_bound_to_one_address_there(tmp_path):
    """--tags smoke on a converged box: no rank_container_result, so the checks go where the box
    reaches its API, the bind address itself (127.0.0.2 is a loopback address 127.0.0.1 is not)."""
    bound = Engine(tmp_path, vision=False, host="127.0.0.2")
    try:
        session_dir(tmp_path)
        inventory = write_inventory(tmp_path, bound.port, tensorfold_host="127.0.0.2", tensorfold_vision=False)
        rc, output = run_playbook(tmp_path / "smoke.yml", inventory, cwd=tmp_path)
        assert rc == 0, output
        assert "is now LIVE!" in output and "127.0.0.1:%d" % bound.port not in output
    finally:
        bound.stop()


def test_ipv6_addresses_go_into_the_urls_in_brackets(tmp_path):
    inventory = write_inventory(tmp_path, 8020, tensorfold_host="fd00::5", ansible_host="2001:db8::7")
    playbook = tmp_path / "smoke-endpoint.yml"
    playbook.write_text(PLAYBOOK + "  post_tasks:\n    - name: Show the endpoint clients are told\n"
                        "      ansible.builtin.debug:\n        msg: \"ENDPOINT {{ smoke_test_result.endpoint }}\"\n")
    rc, output = run_playbook(playbook, inventory, cwd=tmp_path, extra_args=["--check"])
    assert rc == 0, output
    assert "GET http://[fd00::5]:8020/health" in output
    assert "ENDPOINT http://[2001:db8::7]:8020/v1" in output
