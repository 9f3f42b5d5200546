# -*- coding: utf-8 -*-
"""The engine knob table and the one argv builder: the runner script run in --argument-check mode
with a recording tensorfold-native, and the names the operator can override."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex
import subprocess
import sys

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args

RECORDER = """#!%s
import json, os, sys
with open(os.environ["RECORD"], "w") as out:
    json.dump({"argv": sys.argv, "env": dict(os.environ)}, out)
""" % sys.executable

SETTINGS = {
    "tensorfold_gpus": [1, 0], "tensorfold_memory_reserve_gib": 3.5, "tensorfold_kv_pages": True,
    "tensorfold_dense": "q6", "tensorfold_head": "q8", "tensorfold_absorb_mma": True, "tensorfold_w8a8": False,
    "tensorfold_nccl_port": 29583, "tensorfold_parallel": "auto", "tensorfold_kv": "fp8",
    "tensorfold_max_tokens": 32768, "tensorfold_thinking": False, "tensorfold_reasoning_effort": "high",
    "tensorfold_drafter": "dflash2", "tensorfold_vision": True, "tensorfold_served_name": "GLM-5.3-Flash",
    "tensorfold_host": "0.0.0.0", "tensorfold_port": 8020,
}


def argument_check(tmp_path, settings=None, secret=None, key_file=engine_args.API_KEY_MOUNT, extra=()):
    text = engine_args.runner_script(dict(SETTINGS, **(settings or {})), 694272, "1,0", key_file, extra)
    fake = tmp_path / "engine"
    fake.write_text(RECORDER)
    fake.chmod(0o755)
    runner = tmp_path / "runner.sh"
    runner.write_text(text.replace(shlex.quote(engine_args.ENGINE), str(fake)))
    record = tmp_path / "record.json"
    env = dict(os.environ, RECORD=str(record))
    if secret:
        env["TENSORFOLD_API_KEY"] = secret
    subprocess.run(["bash", "-n", str(runner)], check=True)
    subprocess.run(["bash", str(runner), "--argument-check"], check=True, env=env)
    seen = json.loads(record.read_text())
    return seen["argv"][1:], seen["env"], text


def test_argument_check_passes_every_setting_as_the_builder_says(tmp_path):
    argv, env, unused = argument_check(tmp_path, secret="canary-should-be-unset")
    assert argv[:2] == ["serve", "/nonexistent/argument-check"]
    # Exactly rank 0's argv, with the check's model path.
    expected = engine_args.rank_argv(SETTINGS, 0, 694272, api_key_file=engine_args.API_KEY_MOUNT)
    assert argv[2:] == expected[3:]
    flags = " ".join(argv)
    for part in ("--tp 2", "--master 127.0.0.1", "--master-port 29583", "--context 694272", "--parallel auto",
                 "--kv-dtype fp8", "--max-tokens 32768", "--no-thinking", "--reasoning-effort high",
                 "--drafter /drafter", "--vision", "--rank 0 --device 0", "--name GLM-5.3-Flash",
                 "--host 0.0.0.0", "--port 8020", "--api-key-file /run/tensorfold/api-key"):
        assert part in flags
    assert env["NCCL_SOCKET_IFNAME"] == "lo" and env["NCCL_IB_DISABLE"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert env["TENSORFOLD_MEMORY_RESERVE_GIB"] == "3.5"
    assert (env["TENSORFOLD_KV_PAGES"], env["TF_GLM_DENSE"], env["TENSORFOLD_HEAD"]) == ("1", "q6", "q8")
    assert (env["TENSORFOLD_ABSORB_MMA"], env["TENSORFOLD_W8A8"]) == ("1", "0")
    assert env["HF_HUB_OFFLINE"] == "1"
    assert "TENSORFOLD_API_KEY" not in env and "canary" not in flags


def test_rank_1_gets_no_api_flags_and_its_own_device():
    text = engine_args.runner_script(SETTINGS, 65536, "0,1", engine_args.API_KEY_MOUNT)
    start = text.index("RANK1=(")
    assert text[start:text.index(")", start) + 1] == "RANK1=(\n  --rank\n  1\n  --device\n  1\n)"
    one = engine_args.rank_argv(SETTINGS, 1, 65536)
    assert "--port" not in one and "--api-key-file" not in one and "--name" not in one


def test_drafter_none_and_mtp_and_thinking(tmp_path):
    argv, unused_env, unused = argument_check(
        tmp_path, {"tensorfold_drafter": "none", "tensorfold_thinking": True, "tensorfold_vision": False,
                   "tensorfold_parallel": 4}, key_file=None)
    flags = " ".join(argv)
    assert "--no-drafts" in flags and "--drafter" not in flags
    assert "--thinking" in argv and "--no-thinking" not in argv
    assert "--vision" not in flags and "--api-key-file" not in flags and "--parallel 4" in flags
    mtp = engine_args.rank_argv(dict(SETTINGS, tensorfold_drafter="mtp"), 0, 65536)
    assert "--no-drafts" not in mtp and "--drafter" not in mtp


def test_engine_args_are_quoted(tmp_path):
    argv, unused_env, unused = argument_check(tmp_path, extra=["--metrics-open", "a b; rm -rf /"])
    assert "--metrics-open" in argv and "a b; rm -rf /" in argv


def test_overridden_names_reach_the_engine_as_flags_or_variables(tmp_path):
    argv, env, unused = argument_check(tmp_path, {"tensorfold_engine_names": {"dense": "--dense", "w8a8": "TF_W8A8"}})
    assert argv[argv.index("--dense") + 1] == "q6"
    assert env["TF_W8A8"] == "0" and "TENSORFOLD_W8A8" not in env and "TF_GLM_DENSE" not in env


@pytest.mark.parametrize("names", [{"bogus": "X"}, {"dense": "two words"}, {"head": "-x"}, {"kv_pages": "--Kv"}])
def test_bad_names_are_refused(names):
    with pytest.raises(ValueError):
        engine_args.engine_names(names)


def test_knob_table_marks_the_names_the_contract_does_not_give():
    rows = engine_args.knob_table()
    unconfirmed = dict((r["setting"], r["name"]) for r in rows if not r["confirmed"])
    assert unconfirmed == {"tensorfold_kv_pages": "TENSORFOLD_KV_PAGES", "tensorfold_dense": "TF_GLM_DENSE",
                           "tensorfold_head": "TENSORFOLD_HEAD", "tensorfold_absorb_mma": "TENSORFOLD_ABSORB_MMA",
                           "tensorfold_w8a8": "TENSORFOLD_W8A8"}
    assert all(r["confirmed"] for r in rows if r["setting"] == "tensorfold_memory_reserve_gib")
    assert "tensorfold_dense --dense" in engine_args.unconfirmed_note({"tensorfold_engine_names": {"dense": "--dense"}})


def test_pin_cards_asks_for_the_ranks_cards_by_uuid_in_rank_order():
    host = [{"index": i, "uuid": "GPU-%d" % i, "name": "card %d" % i} for i in range(4)]
    # Every card of the host: the settings' indices pick them, rank 0 first.
    picked = engine_args.pin_cards([3, 1], host)
    assert picked == {"device_ids": ["GPU-3", "GPU-1"], "cuda_devices": "GPU-3,GPU-1", "first": host[3]}
    # The host checks' list is already in rank order.
    assert engine_args.pin_cards([1, 0], [host[1], host[0]])["device_ids"] == ["GPU-1", "GPU-0"]


@pytest.mark.parametrize("indices, cards, cuda", [
    ([0, 1], None, "0,1"), ([1, 0], [], "1,0"), ([3, 1], [{"index": 3, "uuid": "GPU-3"}], "1,0"),
    ([0, 2], [{"index": 0, "uuid": "GPU-0"}, {"index": 2}], "0,1")])
def test_pin_cards_falls_back_to_indices_numbered_as_cuda_sees_them(indices, cards, cuda):
    pinned = engine_args.pin_cards(indices, cards)
    assert pinned["device_ids"] == [str(i) for i in indices] and pinned["cuda_devices"] == cuda
    assert pinned["first"] == ([c for c in cards or [] if c["index"] == indices[0]] or [{}])[0]
