#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gateway_plan
short_description: Plan the site gateway's servers, and the boxes it holds out
version_added: 0.2.0
description:
  - Reads, for each box of O(hosts), its address (C(ansible_host), else its name),
    C(tensorfold_port), the failure the step guard recorded this run (C(step_failure)) and the
    smoke test's verdict (C(smoke_test_result)).
  - A box that failed a step this run, or whose smoke test did not find it LIVE, is held out with
    the reason; a box the smoke test did not judge this run stays, and the gateway's own check (a
    real completion) judges it.
  - Warns (W_GATEWAY) when two boxes point at the same address and port. What would make HAProxy refuse the
    configuration (two hosts of one server name, the check timing, the engine's port on a gateway host that is also a
    box) is refused in pre-flight (M(glm53.tensorfold.settings_check)), before any host changes.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  hosts:
    description: The fleet's boxes (the C(gpu_hosts) group).
    type: list
    elements: str
    required: true
  default_port:
    description: The engines' port where a box does not set C(tensorfold_port).
    type: int
    default: 8020
  group:
    description: The group O(hosts) come from, for messages.
    type: str
    default: gpu_hosts
extends_documentation_fragment:
  - glm53.tensorfold.controller
"""

EXAMPLES = r"""
- name: Plan the gateway's servers
  glm53.tensorfold.gateway_plan:
    hosts: "{{ groups['gpu_hosts'] }}"
  register: gateway_plan
"""

RETURN = r"""
servers:
  description: The boxes the gateway forwards to, sorted by host.
  returned: always
  type: list
  elements: dict
  sample: [{"host": "gpu-box-01", "name": "gpu-box-01", "address": "10.0.0.11", "port": 8020}]
held_out:
  description: The boxes held out, with the reason, sorted by host.
  returned: always
  type: list
  elements: dict
  sample: [{"host": "gpu-box-02", "name": "gpu-box-02", "reason": "failed in gpu_host_checks this run"}]
warnings:
  description: Two boxes pointing at the same address and port (a drain of one leaves the other sending to it).
  returned: always
  type: list
  elements: str
names:
  description: Each box's server name at the gateway (its inventory name, characters HAProxy does not allow in a name replaced by C(_)), by host.
  returned: always
  type: dict
  sample: {"gpu-box-01": "gpu-box-01", "gpu@box 02": "gpu_box_02"}
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/gateway_plan.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    hosts=dict(type="list", elements="str", required=True),
    default_port=dict(type="int", default=8020),
    group=dict(type="str", default="gpu_hosts"),
)


def main():
    refuse_on_host("gateway_plan", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
