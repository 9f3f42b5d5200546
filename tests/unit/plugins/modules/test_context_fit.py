# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.glm53.tensorfold.plugins.modules import context_fit

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "rank0-refused.log")


def run_module(args, capsys, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            context_fit.main()
    return json.loads(capsys.readouterr().out)


def test_refusal_in_a_log_file_is_answered_and_recorded(tmp_path, capsys):
    state = str(tmp_path / "context-fit.tsv")
    result = run_module({"log_path": FIXTURE, "requested_context": 1048576, "parallel": "4",
                         "state_file": state, "key": "k1"}, capsys)
    assert result["refused"] is True and result["context"] == 173056 and result["changed"] is True
    assert result["cached"] is False
    looked_up = run_module({"state_file": state, "key": "k1"}, capsys)
    assert looked_up["cached"] is True and looked_up["context"] == 173056 and looked_up["changed"] is False
    again = run_module({"log_path": FIXTURE, "state_file": state, "key": "k1"}, capsys)
    assert again["changed"] is False


def test_unknown_key_is_not_cached(tmp_path, capsys):
    result = run_module({"state_file": str(tmp_path / "none.tsv"), "key": "other"}, capsys)
    assert result["cached"] is False and result["context"] is None


def test_check_mode_does_not_write_the_cache(tmp_path, capsys):
    state = tmp_path / "context-fit.tsv"
    result = run_module({"log_path": FIXTURE, "state_file": str(state), "key": "k"}, capsys, check_mode=True)
    assert result["changed"] is True and result["context"] == 173056
    assert not state.exists()


def test_missing_log_file_reads_as_not_refused(tmp_path, capsys):
    result = run_module({"log_path": str(tmp_path / "absent.log")}, capsys)
    assert result["refused"] is False and result["context"] is None


def test_bad_parallel_fails(capsys):
    result = run_module({"log": "", "parallel": "many"}, capsys)
    assert result["failed"] is True and "parallel" in result["msg"]


START = "runner: 2026-12-05T10:%02d:00Z starting rank 1 and rank 0 (window %d)\n"
SERVED = ("CUDA sm_120 device 0 (NVIDIA RTX PRO 6000 Blackwell Workstation Edition): model 82.10 GiB; 4 streams at once, "
          "2.31 GiB each at a 262144-token window, of 9.4 GiB left after a 4.0 GiB reserve; prompts in 2048-row chunks\n"
          "serving GLM-5.3-Flash at http://0.0.0.0:8020/v1 (sampling: temperature 0.6; drafts: dflash2; context: "
          "262144; loaded in 95.2s)\n")


def test_a_log_file_is_read_from_its_last_start(tmp_path, capsys):
    # The runner appends every start to rank0.log: an earlier start's refusal is not this one's.
    with open(FIXTURE) as handle:
        refused = handle.read()
    log = tmp_path / "rank0.log"
    log.write_text(START % (1, 1048576) + refused + START % (2, 262144) + SERVED)
    result = run_module({"log_path": str(log), "requested_context": 1048576, "parallel": "4"}, capsys)
    assert result["refused"] is False and result["context"] is None
    assert result["streams"] == 4 and result["window"] == 262144
    log.write_text(START % (1, 262144) + SERVED + START % (2, 1048576) + refused)
    result = run_module({"log_path": str(log), "requested_context": 1048576, "parallel": "4"}, capsys)
    assert result["refused"] is True and result["context"] == 173056 and result["window"] is None
    log.write_text(refused)  # no runner line (a log written another way): all of it is read
    assert run_module({"log_path": str(log), "requested_context": 1048576, "parallel": "4"}, capsys)["refused"]
