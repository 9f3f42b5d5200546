# -*- coding: utf-8 -*-
"""The peer copy on this controller (two hosts on connection local): the seed serves the gated
Ablit weights only to requests with the run's secret, on the peers' address, and a killed run
leaves no peer server running past the idle bound (after any download already under way ends).

Real ansible-playbook, weights_fetch's own plan and peer tasks, the real huggingface_hub client,
the Hub emulator (tests/standins/hub) on loopback. The weights_fetch Molecule scenario does the
same across boxes.
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from ansible_run import module_processes, run_playbook, start_playbook
from emulator_process import free_port, running_hub

ABLIT = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold-Ablit"
ABLIT_COMMIT = "57edefd2f5d9b371c8345883304d5af68b52fa24"
TOKEN = "hf_peerCanaryToken3391"
SHARD = "model-00001-of-00002.safetensors"

PLAYBOOK = """
- hosts: all
  gather_facts: false
  environment: "{{ test_environment | default({}) }}"
  tasks:
    - name: Plan the weights
      ansible.builtin.include_role:
        name: glm53.tensorfold.weights_fetch
        tasks_from: plan
    - name: Choose the seed
      ansible.builtin.include_role:
        name: glm53.tensorfold.weights_fetch
        tasks_from: seed
    - name: Fetch once and copy over the LAN
      ansible.builtin.include_role:
        name: glm53.tensorfold.weights_fetch
        tasks_from: peer
"""


@pytest.fixture(name="hub", scope="module")
def hub_fixture(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("repos"), shard_mib=1, tokens="accepted:%s" % TOKEN) as url:
        yield url


@pytest.fixture(name="python_without_hub", scope="module")
def python_without_hub_fixture(tmp_path_factory):
    """A Python with the standard library alone, as on a host that has no Hub client."""
    folder = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = str(folder / "bin" / "python")
    assert subprocess.run([python, "-c", "import huggingface_hub"], capture_output=True, check=False).returncode != 0
    return python


def write_run(tmp_path, hub, idle, names=("seed", "peer"), peer_vars=None):
    port = free_port()
    hosts = {}
    for name in names:
        data = tmp_path / name
        (data / ".state" / "weights").mkdir(parents=True)
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "tensorfold_data_dir": str(data)}
        if name != "seed":
            hosts[name].update(peer_vars or {})
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts, "vars": {
        "tensorfold_hf_endpoint": hub, "tensorfold_ablit": True, "tensorfold_hf_token": TOKEN,
        "tensorfold_drafter": "none", "weights_fetch_strategy": "peer", "weights_fetch_peer_port": port,
        "weights_fetch_seed_address": "127.0.0.1", "weights_fetch_idle_timeout": idle,
        "weights_fetch_progress_interval": 1, "weights_fetch_client_ready": True,
        "weights_fetch_python": sys.executable, "weights_fetch_client_dir": ""}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    return playbook, inventory, port


def servers():
    return module_processes("hf_peer_serve", "hf_snapshot")


def ask(port, path, secret=None):
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
    if secret is not None:
        request.add_header("Authorization", "Bearer %s" % secret)
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def test_the_peer_copies_with_the_runs_secret_and_nothing_stays(tmp_path, hub, python_without_hub):
    # The peer's modules run with a Python that cannot import huggingface_hub, and its environment
    # names a proxy that answers nothing: the copy goes straight to the seed's address.
    playbook, inventory, port = write_run(tmp_path, hub, idle=120, peer_vars={
        "weights_fetch_python": python_without_hub,
        "test_environment": {"http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}})
    before = servers()
    rc, out = run_playbook(playbook, inventory, tmp_path, timeout=300)
    assert rc == 0, out[-3000:]
    peer_shard = tmp_path / "peer" / "model-ablit" / SHARD
    assert peer_shard.read_bytes() == (tmp_path / "seed" / "model-ablit" / SHARD).read_bytes()
    assert not (tmp_path / "seed" / ".state" / "weights" / "peer.secret").exists(), "the secret outlived the copy"
    # The run's stop file ends the server within a second on a quiet machine; CI's, with Molecule
    # scenarios beside this test, once took over 15 s. 45 s stays well inside the idle timeout
    # (120 s), so only the stop file can have ended it.
    ended = time.time()
    while servers() - before and time.time() - ended < 45:
        time.sleep(0.5)
    print("the peer server ended %.1f s after the finished run" % (time.time() - ended))
    assert not servers() - before, "a peer server or download outlived a finished run"
    assert TOKEN not in out


def test_the_peers_copy_at_the_same_time_not_one_after_another(tmp_path, hub):
    # Each peer's plan differs (its own files, its own record); the copy still runs as one task
    # for all the peers: a file included per peer would run whole for one peer before the next.
    playbook, inventory, unused = write_run(tmp_path, hub, idle=120, names=("seed", "peer-a", "peer-b"))
    rc, out = run_playbook(playbook, inventory, tmp_path, timeout=300)
    assert rc == 0, out[-3000:]
    for name in ("peer-a", "peer-b"):
        assert (tmp_path / name / "model-ablit" / SHARD).read_bytes() == (tmp_path / "seed" / "model-ablit" / SHARD).read_bytes()
    follows = [block for block in out.split("TASK [")[1:] if block.startswith("glm53.tensorfold.weights_fetch : Follow to its end")]
    hosts = [[name for name in ("seed", "peer-a", "peer-b") if "[%s]" % name in block] for block in follows]
    assert hosts == [["seed"], ["peer-a", "peer-b"]], hosts


def test_a_killed_run_leaves_a_server_no_stranger_can_read_and_that_ends_when_idle(tmp_path, hub):
    idle = 8
    playbook, inventory, port = write_run(tmp_path, hub, idle=idle)
    before = servers()
    proc = start_playbook(playbook, inventory, tmp_path)
    secret_file = tmp_path / "seed" / ".state" / "weights" / "peer.secret"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if ask(port, "/")[0] == 401:
                break
        except OSError:
            pass
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the operator's run dies (its own process group only)
    proc.wait()
    killed = time.time()
    secret = secret_file.read_text().strip()
    assert oct(secret_file.stat().st_mode & 0o777) == "0o600"
    tree = "/api/models/%s/tree/%s" % (ABLIT, ABLIT_COMMIT)
    shard = "/%s/resolve/%s/%s" % (ABLIT, ABLIT_COMMIT, SHARD)
    for path in (tree, shard):
        for credential in (None, TOKEN, "wrong-secret-0123456789"):
            status, body = ask(port, path, credential)
            assert status == 401 and b"safetensors" not in body and len(body) < 100, (path, credential, status)
    assert ask(port, tree, secret)[0] == 200, "the run's secret was refused"
    with open("/proc/net/tcp") as handle:
        listening = [line.split()[1] for line in handle.read().splitlines()[1:] if line.split()[3] == "0A"]
    assert "0100007F:%04X" % port in listening and "00000000:%04X" % port not in listening, listening
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    assert secret.encode() not in handle.read(), "the secret is in the arguments of pid %s" % pid
            except OSError:
                continue
    # A peer's download may have started before the kill: it waits for the seed's server itself,
    # and it has no watchdog until its follower first looks, so it runs to its end (the server is
    # busy, not idle, meanwhile). The server must end within the idle bound after the later of the
    # kill and that download's end.
    downloads, serving = module_processes("hf_snapshot") - before, module_processes("hf_peer_serve") - before
    quiet = killed
    while (downloads or serving) and time.time() - killed < idle + 90:
        time.sleep(0.5)
        if downloads:
            downloads &= module_processes("hf_snapshot")
            quiet = time.time()
        serving &= module_processes("hf_peer_serve")
    ended = time.time()
    print("the peer server outlived the killed run by %.1f s, the last download by %.1f s (idle timeout %d s)"
          % (ended - killed, ended - quiet, idle))
    for pid in downloads | serving:  # only what this test started
        os.kill(pid, signal.SIGKILL)
    assert not downloads, "a download still runs %.0f s after the kill: %s" % (ended - killed, sorted(downloads))
    assert not serving, "the server still runs %.0f s after the kill: %s" % (ended - killed, sorted(serving))
    assert ended - quiet <= idle + 15
