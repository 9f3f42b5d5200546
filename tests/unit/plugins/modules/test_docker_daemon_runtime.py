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


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path, run):
    real = tmp_path / "etc-real" / "daemon.json"
    real.parent.mkdir()
    real.write_text(OPERATOR)
    link = tmp_path / "daemon.json"
    link.symlink_to(real)
    result = run(path=str(link))
    assert result["changed"] and result["target"] == str(real)
    assert link.is_symlink() and os.readlink(str(link)) == str(real)
    assert '"runtimes"' in real.read_text()
    assert not run(path=str(link))["changed"]


def test_a_dangling_symlink_gets_its_target_created(tmp_path, run):
    link = tmp_path / "daemon.json"
    link.symlink_to(tmp_path / "elsewhere" / "daemon.json")
    result = run(path=str(link))
    assert result["changed"] and result["created"]
    assert link.is_symlink()
    assert json.loads((tmp_path / "elsewhere" / "daemon.json").read_text())["runtimes"]["nvidia"]["path"]


def test_a_utf8_byte_order_mark_is_kept(tmp_path, run):
    path = tmp_path / "daemon.json"
    path.write_bytes(b"\xef\xbb\xbf" + OPERATOR.encode())
    assert run(path=str(path))["changed"]
    assert path.read_bytes().startswith(b'\xef\xbb\xbf{\n  "log-driver"')
    assert not run(path=str(path))["changed"]


def test_utf16_is_refused_naming_the_encoding(tmp_path, run):
    path = tmp_path / "daemon.json"
    data = b"\xff\xfe" + OPERATOR.encode("utf-16-le")
    path.write_bytes(data)
    result = run(path=str(path))
    assert result["failed"] and "UTF-16" in result["msg"] and str(path) in result["msg"]
    assert path.read_bytes() == data


def test_nvidia_ctks_bare_name_found_on_dockerds_path_is_the_same_runtime(tmp_path, run, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    runtime = folder / "nvidia-container-runtime"
    runtime.write_text("#!/bin/sh\n")
    os.chmod(str(runtime), 0o755)
    monkeypatch.setattr(docker_daemon_runtime, "SYSTEMD_PATH", [str(folder)])
    path = tmp_path / "daemon.json"
    ctk = '{\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n            "path": "nvidia-container-runtime"\n        }\n    }\n}'
    path.write_text(ctk)
    result = run(path=str(path), runtime_path=str(runtime))
    assert not result["changed"] and path.read_text() == ctk
    assert result["runtime"] == {"args": [], "path": "nvidia-container-runtime"}
    # a runtime_path elsewhere is another executable: the path is replaced, args kept
    other = run(path=str(path), runtime_path="/opt/other/nvidia-container-runtime", _ansible_check_mode=True)
    assert other["changed"] and other["runtime"] == {"args": [], "path": "/opt/other/nvidia-container-runtime"}


def test_a_bare_runtime_name_is_looked_up_where_dockerd_looks_not_on_the_modules_path(tmp_path, monkeypatch):
    dockerd_path, module_only = tmp_path / "usr-bin", tmp_path / "module-only"
    for folder in (dockerd_path, module_only):
        folder.mkdir()
    found = module_only / "nvidia-container-runtime"
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    monkeypatch.setattr(docker_daemon_runtime, "SYSTEMD_PATH", [str(dockerd_path)])
    monkeypatch.setenv("PATH", str(module_only))
    assert docker_daemon_runtime.resolve_executable("nvidia-container-runtime") is None  # dockerd would not find it
    (dockerd_path / "nvidia-container-runtime").symlink_to(found)
    assert docker_daemon_runtime.resolve_executable("nvidia-container-runtime") == str(found)
    assert docker_daemon_runtime.resolve_executable(str(found)) == str(found)


def test_backup_keeps_the_file_as_it_was_only_when_it_changes(tmp_path, run):
    path = tmp_path / "daemon.json"
    path.write_text(OPERATOR)
    os.chmod(str(path), 0o640)
    first = run(path=str(path), backup=True)
    assert first["changed"] and open(first["backup_file"]).read() == OPERATOR
    assert stat.S_IMODE(os.stat(first["backup_file"]).st_mode) == 0o640
    assert "backup_file" not in run(path=str(path), backup=True)  # nothing changed, nothing kept
    assert "backup_file" not in run(path=str(tmp_path / "new.json"), backup=True)  # nothing was there
    path.write_text(OPERATOR)
    assert "backup_file" not in run(path=str(path), backup=True, _ansible_check_mode=True)


def test_a_dockerd_reading_another_file_is_refused_naming_it_and_nothing_changes(tmp_path, run):
    path = tmp_path / "daemon.json"
    path.write_text(OPERATOR)
    other = tmp_path / "custom" / "daemon.json"
    result = run(path=str(path), dockerd_config_file=str(other), host="gpu7")
    assert result["failed"] and path.read_text() == OPERATOR
    assert result["msg"] == ("[E_DOCKER] gpu7: the running dockerd reads %s (its --config-file), not %s, so the nvidia runtime "
                             "would never reach it; nothing was changed. Set nvidia_toolkit_daemon_json to %s and run again."
                             % (other, path, other))
    snap = run(path=str(path), dockerd_config_file="/var/snap/docker/2963/config/daemon.json", host="gpu7")
    assert snap["failed"] and "(Docker here is the snap)" in snap["msg"] and "snap remove docker" in snap["msg"]
    # The same file, through a symbolic link, is the file dockerd reads.
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert run(path=str(link), dockerd_config_file=str(path))["changed"]
