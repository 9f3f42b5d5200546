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
