"""The runner script template read against the engine contract: rendered by Ansible as the role
renders it, then run in --argument-check mode with a recording tensorfold-native on PATH."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECORDER = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["RECORD"], "w") as out:
    json.dump({"argv": sys.argv[1:], "env": dict(os.environ)}, out)
"""
BASE = {
    "tensorfold_container_name": "glm53-zig", "tensorfold_gpus": [1, 0], "rank_container_cuda_devices": "1,0",
    "tensorfold_memory_reserve_gib": 3.5, "tensorfold_kv_pages": True, "tensorfold_dense": "q6",
    "tensorfold_head": "q8", "tensorfold_absorb_mma": True, "tensorfold_w8a8": False, "tensorfold_nccl_port": 29583,
    "rank_container_context_value": 694272, "tensorfold_parallel": "auto", "tensorfold_kv": "fp8",
    "tensorfold_max_tokens": 32768, "tensorfold_thinking": False, "tensorfold_reasoning_effort": "high",
    "tensorfold_drafter": "dflash2", "tensorfold_vision": True, "rank_container_engine_args": [],
    "tensorfold_served_name": "GLM-5.3-Flash", "tensorfold_host": "0.0.0.0", "tensorfold_port": 8020,
    "rank_container_api_key_file_in": "/run/tensorfold/api-key",
}


def render(tmp_path, **changes):
    variables = dict(BASE, **changes)
    playbook = tmp_path / "render.yml"
    out = tmp_path / "runner.sh"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.template": {"src": os.path.join(ROOT, "templates", "runner.sh.j2"), "dest": str(out),
                                      "mode": "0755"}}]}]))
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "@" + str(extra),
                    "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                   check=True, capture_output=True, env=env, cwd=str(tmp_path))
    return out


def argument_check(tmp_path, runner, secret=None):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    fake = bindir / "tensorfold-native"
    fake.write_text(RECORDER)
    fake.chmod(0o755)
    record = tmp_path / "record.json"
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]), RECORD=str(record))
    if secret:
        env["TENSORFOLD_API_KEY"] = secret
    subprocess.run(["bash", str(runner), "--argument-check"], check=True, env=env)
    return json.loads(record.read_text())


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runner")
    runner = render(tmp)
    return tmp, runner, runner.read_text()


def test_runner_is_valid_bash(rendered):
    subprocess.run(["bash", "-n", str(rendered[1])], check=True)


def test_argument_check_passes_every_setting_as_the_contract_names_it(rendered):
    tmp, runner = rendered[0], rendered[1]
    seen = argument_check(tmp, runner, secret="canary-should-be-unset")
    argv, env = seen["argv"], seen["env"]
    assert argv[:2] == ["serve", "/nonexistent/argument-check"]
    flags = " ".join(argv)
    for expected in ("--tp 2", "--master 127.0.0.1", "--master-port 29583", "--context 694272", "--parallel auto",
                     "--kv-dtype fp8", "--max-tokens 32768", "--no-thinking", "--reasoning-effort high",
                     "--drafter /drafter", "--vision", "--rank 0 --device 0", "--name GLM-5.3-Flash",
                     "--host 0.0.0.0", "--port 8020", "--api-key-file /run/tensorfold/api-key"):
        assert expected in flags
    assert env["NCCL_SOCKET_IFNAME"] == "lo" and env["NCCL_IB_DISABLE"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert env["TENSORFOLD_MEMORY_RESERVE_GIB"] == "3.5"
    assert (env["TENSORFOLD_KV_PAGES"], env["TENSORFOLD_DENSE"], env["TENSORFOLD_HEAD"]) == ("1", "q6", "q8")
    assert (env["TENSORFOLD_ABSORB_MMA"], env["TENSORFOLD_W8A8"]) == ("1", "0")
    assert env["HF_HUB_OFFLINE"] == "1"
    # The key reaches rank 0 only through its file, never the environment or a command line.
    assert "TENSORFOLD_API_KEY" not in env
    assert "canary" not in flags


def test_rank_1_gets_no_api_flags_and_its_own_device(rendered):
    text = rendered[2]
    rank1 = [line for line in text.splitlines() if line.startswith("RANK1=")]
    assert rank1 == ["RANK1=(--rank 1 --device 1)"]
    assert 'serve "$MODEL" "${BOTH[@]}" "${RANK1[@]}" >>"$LOG_DIR/rank1.log"' in text
    assert 'exec tensorfold-native serve "$MODEL" "${BOTH[@]}" "${RANK0[@]}" >>"$LOG_DIR/rank0.log"' in text


def test_drafter_none_and_mtp_and_thinking(tmp_path):
    seen = argument_check(tmp_path, render(tmp_path, tensorfold_drafter="none", tensorfold_thinking=True,
                                           tensorfold_vision=False, rank_container_api_key_file_in="",
                                           tensorfold_parallel=4))
    flags = " ".join(seen["argv"])
    assert "--no-drafts" in flags and "--drafter" not in flags
    assert "--thinking" in seen["argv"] and "--no-thinking" not in seen["argv"]
    assert "--vision" not in flags and "--api-key-file" not in flags and "--parallel 4" in flags
    mtp = argument_check(tmp_path, render(tmp_path, tensorfold_drafter="mtp"))
    assert "--no-drafts" not in mtp["argv"] and "--drafter" not in mtp["argv"]


def test_engine_args_are_quoted(tmp_path):
    seen = argument_check(tmp_path, render(tmp_path, rank_container_engine_args=["--metrics-open", "a b"]))
    assert "--metrics-open" in seen["argv"] and "a b" in seen["argv"]
