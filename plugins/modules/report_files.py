#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: report_files
short_description: Save a run's report files on the controller
version_added: 0.2.0
description:
  - Writes each of O(files) into O(folder) on the controller (the folder is made when missing),
    from the action itself - one task, no module run and no copy per file, whatever the number of hosts.
  - Each file is written beside its final name and renamed over it, so a reader never sees half a report.
  - The files are the run's output, not a change to any host - the task never reports a change, and
    writes them in check mode too.
  - Used by the fleet report (C(fleet-report.md), C(fleet-report.json)) and the host checks' fleet
    summary (C(gpu_host_checks.json)); run it with C(run_once).
author:
  - glm53.tensorfold contributors (@glm53)
options:
  folder:
    description: The controller folder the files go into.
    type: path
    required: true
  files:
    description: The files, each C(name) (a plain file name) and C(content) (text).
    type: list
    elements: dict
    required: true
  mode:
    description: The files' mode (the folder is made C(0755)).
    type: str
    default: "0644"
attributes:
  action:
    description: Runs entirely on the controller; nothing is sent to the host.
    support: full
  check_mode:
    description: Writes the files in check mode too - they are the run's report, not a change to a host.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: Save the fleet summary
  glm53.tensorfold.report_files:
    folder: "{{ playbook_dir }}/reports"
    files:
      - {name: summary.json, content: "{{ summary | to_nice_json }}\n"}
  run_once: true
"""

RETURN = r"""
paths:
  description: The files written, in the order of O(files).
  returned: always
  type: list
  elements: str
  sample: ["/srv/ops/reports/fleet-report.md"]
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/report_files.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    folder=dict(type="path", required=True),
    files=dict(type="list", elements="dict", required=True),
    mode=dict(type="str", default="0644"),
)


def main():
    refuse_on_host("report_files", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
