# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible.module_utils import basic

from ansible_collections.glm53.tensorfold.plugins.modules import docker_restart

OPERATOR = '{\n  "log-driver": "json-file"\n}\n'
EDITED_TEXT = '{\n  "log-driver": "json-file",\n  "default-runtime": "nvidia"\n}\n'
REFUSAL = ("unable to configure the Docker daemon with file %s: the following directives are specified both as a flag "
           "and in the configuration file: default-runtime: (from flag: nvidia, from file: nvidia)")
JOURNAL = ("Starting docker.service - Docker Application Container Engine...\n%s\n"
           "Failed to start docker.service - Docker Application Container Engine.\n")


@pytest.fixture
def host(monkeypatch):
    """A host with systemctl and journalctl whose answers the test sets: host.answers[first two words
    of argv] = [(rc, out, err) or an error to raise, ...], taken in turn (the last one stays; none is
    (0, "", "")); host.ran lists each argv run, in order."""

    class Host(object):
        ran = []
        answers = {}

    def run_command(self, argv, **kwargs):
        Host.ran.append(list(argv))
        answers = Host.answers.get(tuple(argv[:2]), [(0, "", "")])
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    Host.ran, Host.answers = [], {}
    return Host


def edited_file(tmp_path, created=False):
    """daemon.json as docker_daemon_runtime left it, and its registered result."""
    target = tmp_path / "daemon.json"
    target.write_text(EDITED_TEXT)
    os.chmod(str(target), 0o644)
    edit = {"changed": True, "target": str(target), "created": created, "path": str(target)}
    if not created:
        backup = tmp_path / "daemon.json.4242.2026-12-06@02:40:00~"
        backup.write_text(OPERATOR)
        os.chmod(str(backup), 0o640)
        edit["backup_file"] = str(backup)
    return target, edit


def test_docker_that_comes_back_is_restarted_once_and_nothing_else_runs(tmp_path, host, run_module):
    target, edit = edited_file(tmp_path)
    result = run_module(docker_restart, daemon_json_edit=edit, host="gpu7")
    assert result["changed"] and not result.get("failed")
    assert host.ran == [["/usr/bin/systemctl", "restart", "docker"]] == [result["cmd"]]
    assert target.read_text() == EDITED_TEXT


def test_check_mode_restarts_nothing_and_reports_the_restart(tmp_path, host, run_module):
    target, edit = edited_file(tmp_path)
    result = run_module(docker_restart, daemon_json_edit=edit, _ansible_check_mode=True)
    assert result["changed"] and result["cmd"] == ["/usr/bin/systemctl", "restart", "docker"]
    assert host.ran == [] and target.read_text() == EDITED_TEXT
    result = run_module(docker_restart, command=["/usr/local/sbin/restart-dockerd"], _ansible_check_mode=True)
    assert result["changed"] and host.ran == []


def test_a_refused_file_is_put_back_docker_started_again_and_dockerd_quoted_from_its_journal(tmp_path, host, run_module):
    target, edit = edited_file(tmp_path)
    host.answers[("/usr/bin/systemctl", "restart")] = [(1, "", "Job for docker.service failed because the control "
                                                               "process exited with error code.\n")]
    host.answers[("/usr/bin/journalctl", "--unit")] = [(0, JOURNAL % (REFUSAL % target), "")]
    result = run_module(docker_restart, daemon_json_edit=edit, host="gpu7")
    assert result["failed"] and result["code"] == "E_DOCKER"
    assert result["msg"] == (
        "[E_DOCKER] gpu7: Docker did not start again after this run changed {0}: {1}; {0} is back as it was and "
        "Docker runs again with it. Fix what dockerd names (systemctl status docker; journalctl -u docker): a directive "
        "given both as a flag of dockerd in its unit or drop-in and in daemon.json, or one this Docker does not know; "
        "then run again.".format(target, REFUSAL % target))
    # the journal is read before Docker starts again, so that its lines are the refusal's
    assert host.ran == [["/usr/bin/systemctl", "restart", "docker"],
                        ["/usr/bin/journalctl", "--unit", "docker.service", "--lines", "40", "--no-pager", "--output", "cat"],
                        ["/usr/bin/systemctl", "reset-failed", "docker.service", "docker.socket"],
                        ["/usr/bin/systemctl", "start", "docker.service"]]
    assert target.read_text() == OPERATOR and stat.S_IMODE(os.stat(str(target)).st_mode) == 0o640
    assert os.path.exists(edit["backup_file"])  # the backup stays, as docs/nvidia_toolkit.md says
    assert result["put_back"] == "copied" and result["running_again"] is True
    assert not [name for name in os.listdir(str(tmp_path)) if name.startswith(".daemon.json.")]


def test_docker_that_does_not_start_with_its_old_file_either_is_said_so(tmp_path, host, run_module):
    target, edit = edited_file(tmp_path)
    host.answers[("/usr/bin/systemctl", "restart")] = [(1, "", "Job for docker.service failed.\n")]
    host.answers[("/usr/bin/systemctl", "start")] = [(1, "", "Job for docker.service failed.\n")]
    result = run_module(docker_restart, daemon_json_edit=edit, host="gpu7")
    assert ("after this run changed {0}: Unable to restart service docker: Job for docker.service failed.; {0} is back as "
            "it was and Docker does not start with it either.".format(target)) in result["msg"]
    assert result["running_again"] is False and target.read_text() == OPERATOR


def test_a_created_file_is_removed_and_the_configured_command_starts_docker_again(tmp_path, host, run_module):
    target, edit = edited_file(tmp_path, created=True)
    restart = [str(tmp_path / "restart-dockerd"), "--config-file", str(target)]
    host.answers[tuple(restart[:2])] = [(1, "stopping\n", (REFUSAL % target) + "\n"), (0, "started\n", "")]
    result = run_module(docker_restart, command=restart, daemon_json_edit=edit, host="gpu7")
    assert host.ran == [restart, restart]  # no journal: the command's own words are dockerd's
    assert not target.exists() and result["put_back"] == "removed"
    assert ("Docker did not start again after this run changed {0}: {1}; {0} is back as it was and Docker runs again "
            "with it.".format(target, REFUSAL % target)) in result["msg"]


def test_a_restart_command_that_cannot_run_is_quoted(tmp_path, host, run_module):
    missing = str(tmp_path / "missing")
    host.answers[(missing,)] = [OSError(2, "No such file or directory")]
    result = run_module(docker_restart, command=[missing], host="gpu7")
    assert result["failed"] and result["put_back"] is None and result["running_again"] is False
    assert result["msg"].startswith("[E_DOCKER] gpu7: Docker did not start again after a restart for the nvidia runtime: ")
    assert "No such file or directory" in result["dockerd_said"]


def test_a_file_that_cannot_be_put_back_leaves_docker_stopped_and_says_why(tmp_path, host, run_module):
    target, edit = edited_file(tmp_path)
    os.unlink(edit["backup_file"])
    host.answers[("/usr/bin/systemctl", "restart")] = [(1, "", "Job for docker.service failed.\n")]
    result = run_module(docker_restart, daemon_json_edit=edit, host="gpu7")
    assert "%s could not be put back as it was (" % target in result["msg"]
    assert "so Docker was not started again" in result["msg"] and result["put_back"] is None
    assert ["/usr/bin/systemctl", "start", "docker.service"] not in host.ran and target.read_text() == EDITED_TEXT
