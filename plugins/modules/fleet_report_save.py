#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_report_save
short_description: Save the fleet report's files on the controller
description:
  - Writes each file of O(files) into O(folder) on the controller (the folder made when missing,
    mode 0755; each file mode 0644), in the controller's own process - no module is sent anywhere,
    so saving the report costs a run no connection.
  - A file whose content is already there is left alone.
  - The report is the run's output, not a change to any host - it is written in check mode too and
    never reported as a change.
version_added: 0.2.0
author:
  - glm53.tensorfold contributors (@glm53)
options:
  folder:
    description: The folder on the controller (absolute, or relative to the directory ansible-playbook runs in).
    type: path
    required: true
  files:
    description: The files to write.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The file's name inside O(folder).
        type: str
        required: true
      content:
        description: The file's text.
        type: str
        required: true
attributes:
  action:
    description: Runs entirely on the controller; nothing is sent to the host.
    support: full
  check_mode:
    description: Writes in check mode too (the report is the run's output).
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: Save fleet-report.md and fleet-report.json
  glm53.tensorfold.fleet_report_save:
    folder: reports
    files:
      - {name: fleet-report.md, content: "{{ markdown }}"}
      - {name: fleet-report.json, content: "{{ report | to_nice_json }}"}
  run_once: true
"""

RETURN = r"""
written:
  description: The paths whose content was (re)written.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/fleet_report_save.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    folder=dict(type="path", required=True),
    files=dict(type="list", elements="dict", required=True,
               options=dict(name=dict(type="str", required=True), content=dict(type="str", required=True))),
)


def main():
    refuse_on_host("fleet_report_save", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
