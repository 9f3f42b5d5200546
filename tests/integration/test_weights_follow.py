# -*- coding: utf-8 -*-
"""weights_fetch's download, followed by one task: a throttled download lasting over 1,000
progress intervals finishes with a bounded number of tasks, output lines and controller memory;
a killed run leaves no download running past weights_fetch_idle_timeout.

Real ansible-playbook on this controller (connection local), the real huggingface_hub client,
the Hub emulator (tests/standins/hub) throttled on loopback.
"""

import json
import os
import resource
import signal
import sys
import time

import pytest

from ansible_run import module_processes, run_playbook, start_playbook
from emulator_process import running_hub

REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold"
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
INTERVAL = 0.025
THROTTLE_BPS = 60000  # per connection, two files at once: about 4.2 MB in about 35 s, over 1,000 intervals of 0.025 s

PLAYBOOK = """
- hosts: box
  gather_facts: false
  tasks:
    - name: Fetch the checkpoint the role's way
      ansible.builtin.include_role:
        name: glm53.tensorfold.weights_fetch
        tasks_from: snapshot
      vars:
        weights_fetch_repo:
          name: model
          repo_id: {repo}
          revision: {commit}
          gated: false
          local_dir: "{{{{ tensorfold_data_dir }}}}/model"
          state_dir: "{{{{ tensorfold_data_dir }}}}/.state/weights/model"
"""


@pytest.fixture(name="hub")
def hub_fixture(tmp_path):
    with running_hub(tmp_path / "repos", faults={"throttle_bps": THROTTLE_BPS}) as url:
        yield url


def write_run(tmp_path, hub, idle_timeout=120):
    data = tmp_path / "data"
    (data / ".state" / "weights").mkdir(parents=True)
    inventory = tmp_path / "hosts.json"
    inventory.write_text(json.dumps({"all": {"hosts": {"box": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "tensorfold_data_dir": str(data), "weights_fetch_endpoint": hub, "weights_fetch_use_token": False,
        "weights_fetch_client_ready": True, "weights_fetch_python": sys.executable, "weights_fetch_client_dir": "",
        "weights_fetch_state_root": str(data / ".state" / "weights"), "weights_fetch_progress_interval": INTERVAL,
        "weights_fetch_idle_timeout": idle_timeout, "weights_fetch_chunk_mib": 1}}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.format(repo=REPO, commit=COMMIT))
    return playbook, inventory, data


def test_a_download_of_over_1000_intervals_is_followed_by_one_task_with_bounded_output(tmp_path, hub):
    playbook, inventory, data = write_run(tmp_path, hub)
    began = time.time()
    rc, out = run_playbook(playbook, inventory, tmp_path, timeout=400)
    took = time.time() - began
    assert rc == 0, out[-3000:]
    lines = out.splitlines()
    progress = [line for line in lines if line.startswith("box: model: ")]
    follow_tasks = [line for line in lines if line.startswith("TASK [") and "Follow to its end the download" in line]
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    print("download %.1f s = %d intervals of %.2f s; %d output lines, %d progress lines; peak RSS %.0f MiB"
          % (took, took / INTERVAL, INTERVAL, len(lines), len(progress), peak_mib))
    assert took / INTERVAL > 1000, "the download lasted only %.1f s" % took
    assert len(follow_tasks) == 1, "the download was followed by %d tasks" % len(follow_tasks)
    assert 2 <= len(progress) <= 101, "%d progress lines" % len(progress)
    assert len(lines) < 200, "%d lines of output" % len(lines)
    assert peak_mib < 400, "peak RSS %.0f MiB" % peak_mib
    shards = [name for name in os.listdir(str(data / "model")) if name.endswith(".safetensors")]
    assert len(shards) == 2, "shards in place: %s" % shards


def test_a_killed_run_leaves_no_download_past_the_idle_timeout(tmp_path, hub):
    idle = 5
    playbook, inventory, data = write_run(tmp_path, hub, idle_timeout=idle)
    before = module_processes("hf_snapshot")
    # A temp folder of this run's own: the modules unpack themselves there (AnsiballZ), no other test does.
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = start_playbook(playbook, inventory, tmp_path, extra_env={"TMPDIR": str(temp)})
    heartbeat = data / ".state" / "weights" / "model.heartbeat"
    deadline = time.time() + 120
    while time.time() < deadline and not heartbeat.exists():  # the run follows the download
        time.sleep(0.2)
    assert heartbeat.exists(), "the download was never followed"
    ours = module_processes("hf_snapshot") - before
    assert ours, "no download process to watch"
    os.killpg(proc.pid, signal.SIGKILL)  # the operator's run dies (its own process group only)
    proc.wait()
    killed = time.time()
    while time.time() - killed < idle + 30 and (module_processes("hf_snapshot") & ours):
        time.sleep(0.5)
    lived = time.time() - killed
    left = module_processes("hf_snapshot") & ours
    print("the download outlived the killed run by %.1f s (idle timeout %d s)" % (lived, idle))
    for pid in left:  # only what this test started
        os.kill(pid, signal.SIGKILL)
    assert not left, "download processes %s still run %.0f s after the run was killed" % (sorted(left), lived)
    assert lived <= idle + 10
    # The abandoned download ends with os._exit, which skips AnsiballZ's own clean-up: it removes its
    # unpacked module folder itself.
    left_behind = [path.name for path in temp.glob("ansible_*_payload_*")]
    assert not left_behind, "the abandoned download left %s" % left_behind
