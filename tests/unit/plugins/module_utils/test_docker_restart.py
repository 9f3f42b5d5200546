# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils import docker_restart as restart

TARGET = "/etc/docker/daemon.json"
REFUSAL = ("unable to configure the Docker daemon with file /etc/docker/daemon.json: the following directives are "
           "specified both as a flag and in the configuration file: default-runtime: (from flag: nvidia, from file: nvidia)")
SYSTEMCTL_ERR = ('Job for docker.service failed because the control process exited with error code.\n'
                 'See "systemctl status docker.service" and "journalctl -xeu docker.service" for details.\n')
JOURNAL = ("Starting docker.service - Docker Application Container Engine...\n"
           "  %s  \n"
           "docker.service: Main process exited, code=exited, status=1/FAILURE\n"
           "Failed to start docker.service - Docker Application Container Engine.\n" % REFUSAL)
EDITED = {"changed": True, "target": TARGET, "created": False, "backup_file": TARGET + ".4242.2026-12-06@02:40:00~"}


def test_a_failed_command_says_its_error_output_then_its_output_then_its_message():
    assert restart.command_failure(" out 1\n\nout 2\n", "err 1\n  \n") == ["err 1", "out 1", "out 2", "non-zero return code"]
    assert restart.command_failure("", "", "[Errno 2] No such file or directory") == ["[Errno 2] No such file or directory"]


def test_a_failed_service_restart_is_one_message_as_the_service_module_words_it():
    assert restart.service_failure(SYSTEMCTL_ERR) == ["Unable to restart service docker: " + SYSTEMCTL_ERR.strip()]


def test_dockerds_own_line_is_quoted_from_the_restart_or_else_the_journal():
    assert restart.dockerd_said(restart.command_failure("", REFUSAL + "\n")) == REFUSAL
    # The journal's refusal, not systemd's "Failed to start docker.service" after it, nor systemctl's message.
    assert restart.dockerd_said(restart.service_failure(SYSTEMCTL_ERR), JOURNAL) == REFUSAL
    # The last such line wins: the journal's, after the restart's own.
    assert restart.dockerd_said(["invalid directive x"], "failed to start daemon: y\n") == "failed to start daemon: y"


def test_without_a_line_of_dockerd_the_first_thing_the_restart_said_is_quoted():
    assert restart.dockerd_said(restart.command_failure("", "dockerd did not stop\n")) == "dockerd did not stop"
    assert restart.dockerd_said(restart.service_failure(SYSTEMCTL_ERR), "") == \
        "Unable to restart service docker: " + SYSTEMCTL_ERR.strip()
    assert restart.dockerd_said([], "nothing of use\n") == "no message"


def test_the_backup_is_copied_back_and_a_created_file_removed():
    assert restart.put_back(EDITED) == ("copy", EDITED["backup_file"], TARGET)
    assert restart.put_back({"changed": True, "target": TARGET, "created": True}) == ("remove", TARGET)
    # A file that was there and unchanged, or no edit at all: nothing of this run's to undo.
    assert restart.put_back({"changed": False, "target": TARGET, "created": False}) is None
    assert restart.put_back({"changed": False, "target": TARGET, "created": True}) is None
    assert restart.put_back({}) is None and restart.put_back(None) is None


FIX = (" Fix what dockerd names (systemctl status docker; journalctl -u docker): a directive given both as a flag of "
       "dockerd in its unit or drop-in and in daemon.json, or one this Docker does not know; then run again.")


def test_the_message_says_what_the_restart_was_for_and_whether_the_file_is_back_and_docker_runs():
    assert restart.failure_message("gpu7", EDITED, REFUSAL, True) == (
        "[E_DOCKER] gpu7: Docker did not start again after this run changed %s: %s; %s is back as it was and Docker "
        "runs again with it." % (TARGET, REFUSAL, TARGET) + FIX)
    assert restart.failure_message("gpu7", EDITED, REFUSAL, False).endswith(
        "; %s is back as it was and Docker does not start with it either." % TARGET + FIX)
    # A restart for a runtime the running dockerd lacked (daemon.json untouched): no word of the file.
    assert restart.failure_message("gpu7", {"changed": False, "target": TARGET}, "no message", True) == (
        "[E_DOCKER] gpu7: Docker did not start again after a restart for the nvidia runtime: no message." + FIX)


def test_a_file_that_could_not_be_put_back_is_said_so():
    message = restart.failure_message("gpu7", EDITED, REFUSAL, False, "[Errno 28] No space left on device")
    assert ("; %s could not be put back as it was ([Errno 28] No space left on device), so Docker was not started "
            "again." % TARGET) in message
    assert "is back as it was" not in message
