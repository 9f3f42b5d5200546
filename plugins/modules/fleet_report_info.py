#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fleet_report_info
short_description: Build the fleet report from the hosts' published facts
version_added: 0.2.0
description:
  - Reads, for each host of O(hosts), the facts the roles hand each other (C(gpu_host_checks_result),
    C(gpu_host_checks_gpus), C(tensorfold_image_ref), C(tensorfold_image_tag),
    C(weights_fetch_model_revision), C(rank_container_result), C(smoke_test_result),
    C(gateway_state), C(fleet_bench_result)) and site.yml's C(step_failure) (which also holds the
    problems of a host whose settings failed pre-flight) and C(step_stopped), and returns the report,
    one line per host.
  - A host's status is C(live) (smoke test passed), C(failed) (with its codes, step and what to do),
    C(unreachable) (no failure recorded and not in O(reached_end)), C(stopped), C(planned)
    (check mode) or C(skipped) (not smoke-tested in this run).
  - The fleet_report role renders the report as Markdown with its own template and saves both.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  hosts:
    description: The inventory hosts the report covers.
    type: list
    elements: str
    required: true
  plan:
    description: Whether the run was a plan or check-mode run (nothing changed).
    type: bool
    default: false
  reached_end:
    description:
      - The hosts still in the run at the report. Default the play's hosts as this task sees them
        (C(ansible_play_hosts)), which leave out the hosts Ansible found unreachable.
    type: list
    elements: str
  slow_ratio:
    description: A box slower than this share of the fleet's median speed gets C(W_SLOW) (after fleet_bench).
    type: float
    default: 0.85
  baselines:
    description:
      - "The controller file that keeps each box's last real bench (C({hosts: {BOX: {measured_at, url, cases}}})),
        which the monitoring role compares live speed with. Read here; the new record is returned as
        RV(baselines) for the role to save."
      - A box this run measured gets this run's figures; every other box keeps its entry. A plan or
        check-mode run, and a run without the bench, change nothing.
      - Unset, no record is read or returned.
    type: path
extends_documentation_fragment:
  - glm53.tensorfold.controller
"""

EXAMPLES = r"""
- name: Build the fleet report
  glm53.tensorfold.fleet_report_info:
    hosts: "{{ groups['all'] }}"
    plan: "{{ ansible_check_mode }}"
  register: report
  run_once: true
"""

RETURN = r"""
report:
  description: >-
    C({generated_at, plan, summary: {hosts, live, failed, unreachable, stopped, planned, skipped},
    summary_text, hosts: [lines], gateway_lines}); each line has C(host), C(status), C(label), C(codes), C(stage),
    C(endpoint), C(context), C(streams), C(image_ref), C(image_tag), C(revision), C(warnings),
    C(warning_codes), C(errors) and C(todo), and C(gateway) (C({url, state, detail})) and C(bench) where
    there are. With gateways the report also has C(gateways) (their URLs), after a bench C(bench).
    C(generated_at) is when it was built (UTC).
  returned: always
  type: dict
baselines:
  description: The baselines record after this run (see O(baselines)).
  returned: when O(baselines) is set and its file could be read
  type: dict
baselines_changed:
  description: Whether this run measured a box, so that RV(baselines) differs from the saved record.
  returned: when O(baselines) is set
  type: bool
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/fleet_report_info.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    hosts=dict(type="list", elements="str", required=True),
    plan=dict(type="bool", default=False),
    reached_end=dict(type="list", elements="str"),
    slow_ratio=dict(type="float", default=0.85),
    baselines=dict(type="path"),
)


def main():
    refuse_on_host("fleet_report_info", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
