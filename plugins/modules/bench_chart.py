#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bench_chart
short_description: Draw the bench's picture (PNG) for the fleet report
description:
  - Draws one bar group per box from the fleet report's bench figures (decode with one and four
    streams, prefill of 4K and 32K-token prompts), with the recipe's figures as dashed lines, and
    saves it as a PNG beside the report. No plotting package is needed.
  - Meant to run on the controller; the picture is the run's output, never a change.
version_added: 0.2.0
author:
  - glm53.tensorfold contributors (@glm53)
options:
  report:
    description: The fleet report (the C(report) that M(glm53.tensorfold.fleet_report_info) returns) holding C(bench) figures.
    type: dict
    required: true
  dest:
    description: The PNG file to write.
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: The picture is written in check mode too (it is the run's output, like the report).
  diff_mode:
    support: none
    description: Returns no diff.
"""

EXAMPLES = r"""
- name: Save the picture beside the report
  glm53.tensorfold.bench_chart:
    report: "{{ fleet_report_result }}"
    dest: reports/fleet-bench.png
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The file written.
  returned: success
  type: str
size:
  description: The PNG's size in bytes.
  returned: success
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.bench_chart import render


def main():
    module = AnsibleModule(
        argument_spec=dict(report=dict(type="dict", required=True), dest=dict(type="path", required=True)),
        supports_check_mode=True,
    )
    data = render(module.params["report"])
    dest = module.params["dest"]
    folder = os.path.dirname(dest)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(dest + ".tmp", "wb") as handle:
        handle.write(data)
    os.replace(dest + ".tmp", dest)
    module.exit_json(changed=False, dest=dest, size=len(data))


if __name__ == "__main__":
    main()
