# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""What a Docker restart that did not come back leaves to do, and what the run says about it.

A dockerd that refuses the daemon.json this run wrote (a directive its unit also gives as a flag,
a key it does not know) would leave the host without Docker and its containers stopped. The
``docker_restart`` module then puts the file back as it was (from the backup the
``docker_daemon_runtime`` module made, or removes the file that module created), starts Docker
again and fails ``E_DOCKER`` quoting dockerd. The functions here decide which line of what the
restart and the journal said is dockerd's, what to put back, and the message.

Pure functions, no I/O: the module runs the commands and touches the file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem

# The service manager's commands: the restart (what ansible.builtin.service runs on systemd), the
# journal read before Docker is started again (so its lines are the refusal's), and the start
# again. systemd gives up on a unit that failed a few times in a row (start-limit-hit): the start
# clears that first.
SERVICE_RESTART = ["restart", "docker"]
JOURNAL = ["--unit", "docker.service", "--lines", "40", "--no-pager", "--output", "cat"]
SERVICE_RESET_FAILED = ["reset-failed", "docker.service", "docker.socket"]
SERVICE_START = ["start", "docker.service"]

# The lines in which dockerd says why it did not start (case as dockerd and moby write them).
DOCKERD_LINE = re.compile("daemon.json|configuration|directive|unable to configure|failed to start daemon")

FIX = ("Fix what dockerd names (systemctl status docker; journalctl -u docker): a directive given both as a flag "
       "of dockerd in its unit or drop-in and in daemon.json, or one this Docker does not know; then run again.")


def failure_lines(stderr="", stdout="", msg=""):
    """What a failed restart said, as lines: its error output's, its output's, then its message
    (one entry, as it is), each stripped, the empty ones left out."""
    lines = (stderr or "").splitlines() + (stdout or "").splitlines() + [msg or ""]
    return [line.strip() for line in lines if line.strip()]


def service_failure(err):
    """failure_lines for a ``systemctl restart docker`` that failed with error output err."""
    return failure_lines(msg="Unable to restart service docker: %s" % (err or ""))


def command_failure(stdout, stderr, error=None):
    """failure_lines for the configured restart command: its exit status was not 0, or it could
    not run at all (error, the reason)."""
    return failure_lines(stderr, stdout, error or "non-zero return code")


def dockerd_said(failure, journal=""):
    """The line to quote: the last of the restart's lines, then the journal's, that says why dockerd
    did not start; else the restart's first line; else ``no message``."""
    said = [line for line in failure + (journal or "").splitlines() if DOCKERD_LINE.search(line)]
    if said:
        return said[-1].strip()
    return failure[0].strip() if failure else "no message"


def edited(daemon_json_edit):
    """Whether the docker_daemon_runtime result that prompted the restart changed daemon.json."""
    return bool((daemon_json_edit or {}).get("changed"))


def put_back(daemon_json_edit):
    """What gives Docker its previous daemon.json back, from the docker_daemon_runtime result:
    ``("copy", backup_file, target)`` when it kept a backup, ``("remove", target)`` when it
    created the file, else None (nothing of this run's to undo)."""
    edit = daemon_json_edit or {}
    if edit.get("backup_file"):
        return ("copy", edit["backup_file"], edit["target"])
    if edited(edit) and edit.get("created") and edit.get("target"):
        return ("remove", edit["target"])
    return None


def failure_message(host, daemon_json_edit, said, running_again, put_back_error=None):
    """The E_DOCKER problem for a Docker that did not come back: what the restart was for, dockerd's
    line, and (when this run changed daemon.json) whether the file is back and Docker runs again.
    put_back_error: why the file could not be put back, when it could not."""
    edit = daemon_json_edit or {}
    changed = edited(edit)
    cause = "this run changed %s" % edit.get("target") if changed else "a restart for the nvidia runtime"
    after = ""
    if put_back_error:
        after = "; %s could not be put back as it was (%s), so Docker was not started again" % (
            edit.get("target"), put_back_error)
    elif changed:
        after = "; %s is back as it was and Docker %s" % (
            edit.get("target"), "runs again with it" if running_again else "does not start with it either")
    return problem("E_DOCKER", host, "Docker did not start again after %s: %s%s" % (cause, said, after), FIX)
