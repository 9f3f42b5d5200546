# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.glm53.tensorfold.plugins.modules import docker_daemon_runtime

OPERATOR = '{\n  "log-driver": "json-file",\n  "data-root": "/srv/docker"\n}\n'


class ModuleExit(Exception):
    pass


def run(monkeypatch, **args):
    """Run the module with args; return its result dict (failed=True when it called fail_json)."""
    args.setdefault("runtime_path", "/usr/bin/nvidia-container-runtime")
    outcome = {}

    def exit_json(self, **kwargs):
        outcome.update(kwargs)
        raise ModuleExit()

    def fail_json(self, **kwargs):
        outcome.update(kwargs, failed=True)
        raise ModuleExit()

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    with patch_module_args(args), pytest.raises(ModuleExit):
        docker_daemon_runtime.main()
    return outcome


def test_runtime_is_added_and_a_second_run_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "daemon.json"
    path.write_text(OPERATOR)
    os.chmod(str(path), 0o640)
    first = run(monkeypatch, path=str(path))
    assert first["changed"] and not first["created"]
    text = path.read_text()
    assert text.startswith('{\n  "log-driver": "json-file",\n  "data-root": "/srv/docker",\n  "runtimes"')
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o640
    second = run(monkeypatch, path=str(path))
    assert not second["changed"]
    assert path.read_text() == text


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "daemon.json"
    path.write_text(OPERATOR)
    result = run(monkeypatch, path=str(path), _ansible_check_mode=True, _ansible_diff=True)
    assert result["changed"]
    assert '"runtimes"' in result["diff"]["after"]
    assert path.read_text() == OPERATOR


def test_missing_file_and_folder_are_created(tmp_path, monkeypatch):
    path = tmp_path / "docker" / "daemon.json"
    result = run(monkeypatch, path=str(path), set_default=True)
    assert result["changed"] and result["created"]
    document = json.loads(path.read_text())
    assert document["default-runtime"] == "nvidia"
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o644


def test_broken_file_fails_naming_it_and_stays_untouched(tmp_path, monkeypatch):
    path = tmp_path / "daemon.json"
    path.write_text('{"log-driver": ')
    result = run(monkeypatch, path=str(path))
    assert result["failed"]
    assert str(path) in result["msg"] and "not valid JSON" in result["msg"]
    assert path.read_text() == '{"log-driver": '
