# -*- coding: utf-8 -*-
"""The peer copy in waves (weights_fetch_peer_fanout) on this controller: four hosts on connection
local, each peer on its own loopback address. A peer that has its verified copy serves the next
wave, so the seed's link carries fewer copies at once; a peer whose copy failed serves nothing.

Real ansible-playbook and weights_fetch's tasks, the Hub emulator on loopback (as
test_weights_peer.py, whose run this extends).
"""

import glob
import json
import os
import re
import time

import pytest

from ansible_run import module_processes, run_playbook
from emulator_process import running_hub
from test_weights_peer import SHARD, TOKEN, write_run

NAMES = ("seed", "peer-a", "peer-b", "peer-c")


@pytest.fixture(name="hub", scope="module")
def hub_fixture(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("repos"), shard_mib=1, tokens="accepted:%s" % TOKEN) as url:
        yield url


def waves_run(tmp_path, hub, fanout, host_vars=None, extra_args=()):
    playbook, inventory, unused = write_run(tmp_path, hub, idle=120, names=NAMES)
    data = json.loads(inventory.read_text())
    data["all"]["vars"]["weights_fetch_peer_fanout"] = fanout
    for number, name in enumerate(NAMES):
        if name != "seed":  # the seed serves on weights_fetch_seed_address (127.0.0.1)
            data["all"]["hosts"][name]["ansible_host"] = "127.0.0.%d" % (number + 1)
        data["all"]["hosts"][name].update((host_vars or {}).get(name, {}))
    inventory.write_text(json.dumps(data))
    return run_playbook(playbook, inventory, tmp_path, extra_args=extra_args, timeout=400)


def hosts_of(out, task):
    """For each run of a task, the hosts that ran it (in the order of the output)."""
    blocks = [block for block in out.split("TASK [")[1:] if block.startswith("glm53.tensorfold.weights_fetch : " + task)]
    return [[name for name in NAMES if re.search(r"^(ok|changed): \[%s\]" % re.escape(name), block, re.M)] for block in blocks]


def served_bytes(bind, since):
    """File bytes the peer servers bound to ``bind`` served, from their async results (which
    include their arguments) written after ``since``."""
    total = 0
    for path in glob.glob(os.path.expanduser("~/.ansible_async/*")):
        if os.path.getmtime(path) < since:
            continue
        try:
            with open(path) as handle:
                result = json.load(handle)
        except (OSError, ValueError):
            continue
        if (result.get("invocation") or {}).get("module_args", {}).get("bind") == bind and "bytes" in result:
            total += result["bytes"]
    return total


def copied(tmp_path, name):
    return (tmp_path / name / "model-ablit" / SHARD).read_bytes() == (tmp_path / "seed" / "model-ablit" / SHARD).read_bytes()


def test_a_fanout_of_one_copies_in_two_waves_and_a_peer_serves_the_second(tmp_path, hub):
    before, began = module_processes("hf_peer_serve", "hf_snapshot"), time.time()
    rc, out = waves_run(tmp_path, hub, fanout=1)
    assert rc == 0, out[-3000:]
    for name in NAMES[1:]:
        assert copied(tmp_path, name), name
    # Wave 1: the seed serves peer-a. Wave 2 (the last, every peer left): the seed serves peer-b and
    # peer-a, which has its verified copy now, serves peer-c.
    assert hosts_of(out, "Start serving the verified copy") == [["seed"], ["seed", "peer-a"]]
    follows = hosts_of(out, "Follow to its end")
    assert follows == [["seed"], ["peer-a"], ["peer-b", "peer-c"]], follows
    # peer-a's server (on its own address) sent peer-c the files: about one copy of the weights.
    ended = time.time()
    while not served_bytes("127.0.0.2", began) and time.time() - ended < 45:
        time.sleep(0.5)
    shards = sum(os.path.getsize(path) for path in glob.glob(str(tmp_path / "seed" / "model-ablit" / "*.safetensors")))
    assert served_bytes("127.0.0.2", began) >= shards > 0
    for name in NAMES:
        assert not (tmp_path / name / ".state" / "weights" / "peer.secret").exists(), name
    while module_processes("hf_peer_serve", "hf_snapshot") - before and time.time() - ended < 45:
        time.sleep(0.5)
    assert not module_processes("hf_peer_serve", "hf_snapshot") - before, "a server or download outlived the run"


def test_a_peer_whose_copy_failed_serves_no_later_wave(tmp_path, hub):
    # peer-a's copy cannot run (no such Python): the seed serves the last wave alone.
    rc, out = waves_run(tmp_path, hub, fanout=1, host_vars={"peer-a": {"weights_fetch_python": "/nonexistent/python3"}})
    assert rc != 0
    assert not (tmp_path / "peer-a" / "model-ablit" / SHARD).exists()
    for name in ("peer-b", "peer-c"):
        assert copied(tmp_path, name), name
    assert hosts_of(out, "Start serving the verified copy") == [["seed"], ["seed"]]


@pytest.mark.parametrize("wave_bytes, servers", [("1", [["seed"], ["seed", "peer-a"]]), ("34359738368", [["seed"]])])
def test_auto_copies_in_waves_only_once_a_peer_copies_enough(tmp_path, hub, wave_bytes, servers):
    # The stand-in checkpoint is small: at the real threshold (32 GiB) every peer copies from the
    # seed at once; at 1 byte the same run copies in waves of one peer per host.
    rc, out = waves_run(tmp_path, hub, fanout="auto", extra_args=("-e", "weights_fetch_wave_bytes=" + wave_bytes))
    assert rc == 0, out[-3000:]
    for name in NAMES[1:]:
        assert copied(tmp_path, name), name
    assert hosts_of(out, "Start serving the verified copy") == servers
