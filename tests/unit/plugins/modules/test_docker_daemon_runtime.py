# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible_collections.glm53.tensorfold.plugins.modules import docker_daemon_runtime

OPERATOR = '{\n  "log-driver": "json-file",\n  "data-root": "/srv/docker"\n}\n'


@pytest.fixture
def run(run_module):
    """Run the module with args; return its result dict (failed=True when it called fail_json)."""
    def call(**args):
        args.setdefault("runtime_path", "/usr/bin/nvidia-container-runtime")
        return run_module(docker_daemon_runtime, **args)
    return call


def test_runtime_is_added_and_a_second_run_changes_nothing(tmp_path, run):
    path = tmp_path / "daemon.json"
    path.write_text(OPERATOR)
    os.chmod(str(path), 0o640)
    first = run(path=str(path))
    assert first["changed"] and not first["created"]
    text = path.read_text()
    assert text.startswith('{\n  "log-driver": "json-file",\n  "data-root": "/srv/docker",\n  "runtimes"')
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o640
    second = run(path=str(path))
    assert not second["changed"]
    assert path.read_text() == text


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path, run):
    path = tmp_path / "daemon.json"
    path.write_text(OPERATOR)
    result = run(path=str(path), _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"]
    assert '"runtimes"' in result["diff"]["after"]
    assert path.read_text() == OPERATOR


def test_missing_file_and_folder_are_created(tmp_path, run):
    path = tmp_path / "docker" / "daemon.json"
    result = run(path=str(path), set_default=True)
    assert result["changed"] and result["created"]
    document = json.loads(path.read_text())
    assert document["default-runtime"] == "nvidia"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644


def test_broken_file_fails_naming_it_and_stays_untouched(tmp_path, run):
    path = tmp_path / "daemon.json"
    path.write_text('{"log-driver": ')
    result = run(path=str(path))
    assert result["failed"]
    assert str(path) in result["msg"] and "not valid JSON" in result["msg"]
    assert path.read_text() == '{"log-driver": '
