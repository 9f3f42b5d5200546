#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Restart Docker; when dockerd does not come back, give it its previous daemon.json and say why."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_restart
short_description: Restart Docker, and give a dockerd that does not come back its previous daemon.json
version_added: 0.3.0
description:
  - Restarts Docker with C(systemctl restart docker), as M(ansible.builtin.service) does on systemd, or with
    O(command) for hosts whose dockerd is not a service.
  - When dockerd does not come back (it refuses the file, such as a directive also given as a flag in its unit
    or a key it does not know), a host would be left without Docker and its containers stopped. The module then
    reads C(journalctl --unit docker.service) (service manager only, before Docker is started again, so
    that its lines are the refusal's), puts back the daemon.json of O(daemon_json_edit) as it was (the
    backup's bytes, mode and owner) or removes the file it created, starts Docker again
    (C(systemctl reset-failed docker.service docker.socket), then C(systemctl start docker.service); or
    O(command) again) and fails C(E_DOCKER) quoting dockerd's line and saying whether the file is back
    and Docker runs again.
  - The line quoted is the last one of the restart's error output, output and message, then the journal's,
    that names C(daemon.json), a C(configuration), a C(directive), C(unable to configure) or
    C(failed to start daemon); else the restart's first line.
  - Does not wait for the restarted daemon to answer; M(glm53.tensorfold.host_resources) with
    C(docker_wait) does, in the read that follows.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  command:
    description:
      - A command (argv, no shell) that restarts Docker, run instead of C(systemctl restart docker); also the
        one that starts it again after its previous daemon.json is back. No journal is read then.
      - Empty uses the service manager (systemd).
    type: list
    elements: str
    default: []
  daemon_json_edit:
    description:
      - The result of the M(glm53.tensorfold.docker_daemon_runtime) task (registered, with its C(backup)
        on) whose change the restart is for; empty when the restart is for another reason.
      - Its C(backup_file) is copied back over its C(target); with C(changed) and C(created), C(target)
        is removed. Other keys are not read.
    type: dict
    default: {}
  host:
    description: The host's name in the failure (C([E_DOCKER] host:) ...).
    type: str
    default: localhost
attributes:
  check_mode:
    description: Restarts nothing and reports C(changed), as M(ansible.builtin.service) does for a restart.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
notes:
  - The module always reports C(changed) (a restart is a change), and fails only when Docker did not come back.
"""

EXAMPLES = r"""
- name: Register the nvidia runtime with Docker
  glm53.tensorfold.docker_daemon_runtime:
    runtime_path: /usr/bin/nvidia-container-runtime
    backup: true
  register: runtime_config

- name: Restart Docker, putting daemon.json back when dockerd refuses it
  glm53.tensorfold.docker_restart:
    daemon_json_edit: "{{ runtime_config }}"
    host: "{{ inventory_hostname }}"
  when: runtime_config is changed

- name: Restart a dockerd that is not a service
  glm53.tensorfold.docker_restart:
    command: [/usr/local/sbin/restart-dockerd]
"""

RETURN = r"""
cmd:
  description: The command that restarted (or, in check mode, would restart) Docker.
  returned: always
  type: list
  elements: str
  sample: [/usr/bin/systemctl, restart, docker]
stdout:
  description: What the restart printed.
  returned: success, not in check mode
  type: str
  sample: ""
stderr:
  description: What the restart printed on its error output.
  returned: success, not in check mode
  type: str
  sample: ""
code:
  description: The recipe's code of the failure.
  returned: failure
  type: str
  sample: E_DOCKER
dockerd_said:
  description: The line quoted in the failure's message.
  returned: failure
  type: str
  sample: "unable to configure the Docker daemon with file /etc/docker/daemon.json: the following directives are
    specified both as a flag and in the configuration file: default-runtime: (from flag: nvidia, from file: nvidia)"
put_back:
  description: What was done to daemon.json, C(copied) (its backup), C(removed), or null (nothing of this run's).
  returned: failure
  type: str
  sample: copied
running_again:
  description: Whether Docker started again after daemon.json was put back.
  returned: failure
  type: bool
  sample: true
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.glm53.tensorfold.plugins.module_utils.docker_restart import (
    JOURNAL,
    SERVICE_RESET_FAILED,
    SERVICE_RESTART,
    SERVICE_START,
    command_failure,
    dockerd_said,
    failure_message,
    put_back,
    service_failure,
)


def run(module, argv):
    """(rc, stdout, stderr, error): error says why argv could not run at all (rc is None then)."""
    try:
        rc, out, err = module.run_command(argv, handle_exceptions=False)
    except (IOError, OSError) as exc:
        return None, "", "", to_native(exc)
    return rc, out, err, None


def copy_back(module, backup, target):
    """Replace target by a copy of backup, with the backup's bytes, mode, times and (as root) owner."""
    fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=os.path.dirname(target) or ".")
    os.close(fd)
    try:
        shutil.copy2(backup, tmp)
        status = os.stat(backup)
        try:
            os.chown(tmp, status.st_uid, status.st_gid)
        except OSError:
            pass  # not root: the file stays this user's, as the backup is
        module.atomic_move(tmp, target, keep_dest_attrs=False)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            command=dict(type="list", elements="str", default=[]),
            daemon_json_edit=dict(type="dict", default={}),
            host=dict(type="str", default="localhost"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    command = params["command"]
    systemctl = None if command else (module.get_bin_path("systemctl") or "systemctl")
    restart = command or [systemctl] + SERVICE_RESTART
    if module.check_mode:
        module.exit_json(changed=True, cmd=restart)

    rc, out, err, error = run(module, restart)
    if rc == 0:
        module.exit_json(changed=True, cmd=restart, stdout=out, stderr=err)

    # dockerd did not come back: keep what the restart said, read the journal before Docker starts again
    failure = command_failure(out, err, error) if command else service_failure(err or error)
    journal = ""
    if not command:
        journalctl = module.get_bin_path("journalctl")
        if journalctl:
            journal = run(module, [journalctl] + JOURNAL)[1]
    said = dockerd_said(failure, journal)

    edit = params["daemon_json_edit"]
    plan = put_back(edit)
    put_back_error = None
    try:
        if plan and plan[0] == "copy":
            copy_back(module, plan[1], plan[2])
        elif plan and os.path.lexists(plan[1]):
            os.unlink(plan[1])
    except (IOError, OSError) as exc:
        put_back_error = to_native(exc)

    running = False
    if not put_back_error:
        if command:
            running = run(module, command)[0] == 0
        else:
            run(module, [systemctl] + SERVICE_RESET_FAILED)
            running = run(module, [systemctl] + SERVICE_START)[0] == 0
    module.fail_json(msg=failure_message(params["host"], edit, said, running, put_back_error), code="E_DOCKER",
                     cmd=restart, dockerd_said=said, put_back=None if put_back_error or not plan else
                     ("copied" if plan[0] == "copy" else "removed"), running_again=running)


if __name__ == "__main__":
    main()
