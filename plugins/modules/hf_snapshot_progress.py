#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_snapshot_progress
short_description: Follow a background hf_snapshot download to its end, with bounded output
description:
  - Follows a download started by M(glm53.tensorfold.hf_snapshot) with C(async) and C(poll=0)
    until it ends, and returns the download's own result (failing with its coded message).
  - One task however long the download lasts. It prints a progress line (bytes done/total, rate,
    ETA) only when the whole percentage grows, so at most 101 lines, and keeps no history.
  - While it follows, it touches I(heartbeat_file) at least every second; the download stops by
    itself when that file grows older than its C(idle_timeout), so a killed run leaves no download
    running for longer than that.
  - The action plugin does the following on the controller; each call of the module on the host
    waits up to I(wait) seconds, touching the heartbeat, and returns the progress.
version_added: "0.2.0"
author:
  - glm53.tensorfold contributors (@glm53)
options:
  jid:
    description: The async job id of the download (C(ansible_job_id) of its registered result).
    type: str
    required: true
  progress_file:
    description: The download's I(progress_file).
    type: path
    required: true
  heartbeat_file:
    description: The download's I(heartbeat_file), touched while the run follows.
    type: path
  wait:
    description: Seconds each look at the host may wait for the end (the shortest time between two progress lines).
    type: float
    default: 20
  timeout:
    description: Seconds to follow before failing with C(E_DOWNLOAD) (the download itself stops by its idle timeout).
    type: int
    default: 172800
  label:
    description: What the progress lines name (the repository's short name).
    type: str
    default: download
  job_file:
    description: The async job's results file on the host; set by the action plugin from I(jid).
    type: path
attributes:
  action:
    support: full
    description: The following loop runs in the action plugin on the controller.
  check_mode:
    support: none
    description: The download it follows never runs in check mode.
"""

EXAMPLES = r"""
- name: Fetch in the background
  glm53.tensorfold.hf_snapshot:
    repo_id: Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold
    revision: 078455ffe6472f9a52fbc1139f58b9db2881b25c
    local_dir: /srv/glm53/model
    progress_file: /srv/glm53/.state/weights/model.progress.json
    heartbeat_file: /srv/glm53/.state/weights/model.heartbeat
    idle_timeout: 120
  async: 172800
  poll: 0
  register: job

- name: Follow it to its end
  glm53.tensorfold.hf_snapshot_progress:
    jid: "{{ job.ansible_job_id }}"
    progress_file: /srv/glm53/.state/weights/model.progress.json
    heartbeat_file: /srv/glm53/.state/weights/model.heartbeat
    wait: 20
    label: model
  register: result
"""

RETURN = r"""
finished:
  description: Whether the job ended (this module alone); the action returns the download's result.
  returned: always
  type: bool
percent:
  description: The whole percentage done.
  returned: always
  type: int
text:
  description: The progress line (bytes done/total, rate, ETA).
  returned: always
  type: str
progress_lines:
  description: Progress lines printed while following (action).
  returned: always
  type: int
looks:
  description: Calls of the module on the host while following (action).
  returned: always
  type: int
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import follow


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return ""


def _touch(path):
    if not path:
        return
    try:
        with open(path, "a"):
            os.utime(path, None)
    except FileNotFoundError:
        # The download makes its state folder when it starts; until then nothing watches the
        # heartbeat (its watchdog arms on the first touch), so the next look touches it.
        pass


def look(params):
    """Wait up to ``wait`` seconds for the job's end, touching the heartbeat; return the progress."""
    began = time.time()
    # Short pauses first, then one a second: a download that ends soon after the look began (a
    # small repository, a peer's copy over the LAN) is seen within a fraction of a second, and a
    # long one costs a look a second.
    pause = 0.05
    while True:
        _touch(params["heartbeat_file"])
        try:
            progress = json.loads(_read(params["progress_file"]) or "{}")
        except ValueError:
            progress = {}  # being replaced right now: read again next time
        finished = follow.job_finished(_read(params["job_file"])) if params["job_file"] else False
        if finished or bool(progress.get("finished")) or time.time() - began >= params["wait"]:
            return {"finished": finished or bool(progress.get("finished")), "percent": follow.percent(progress),
                    "text": progress.get("text", "starting")}
        time.sleep(min(pause, max(0.05, params["wait"] - (time.time() - began))))
        pause = min(1.0, pause * 2)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            jid=dict(type="str", required=True),
            progress_file=dict(type="path", required=True),
            heartbeat_file=dict(type="path"),
            wait=dict(type="float", default=20),
            timeout=dict(type="int", default=172800),
            label=dict(type="str", default="download"),
            job_file=dict(type="path"),
        ),
        supports_check_mode=False,
    )
    module.exit_json(changed=False, **look(module.params))


if __name__ == "__main__":
    main()
