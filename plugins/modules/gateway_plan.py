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
  - Fails (E_SETTINGS) before anything is written when two hosts' names become the same server name at
    the gateway, or when the gateway's ports are the engine's on a gateway host that is also a box;
    warns (W_GATEWAY) when two boxes point at the same address and port.
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
  check:
    description:
      - The gateway's health check timing; when given, it is checked first (E_SETTINGS when a wedged engine
        could stay in rotation longer than two check intervals).
    type: dict
    suboptions:
      interval: {description: Seconds between two checks (C(gateway_check_interval))., type: float, required: true}
      timeout: {description: Seconds one check may take (C(gateway_check_timeout))., type: float, required: true}
      fastinter_ms: {description: Milliseconds between the fast re-checks (C(gateway_check_fastinter_ms))., type: float, required: true}
      fall:
        description:
          - Failed checks that take a box out (C(gateway_check_fall)); at least 2, so that a box put back proves a
            passed check (M(glm53.tensorfold.gateway_server) O(glm53.tensorfold.gateway_server#module:state=ready)).
        type: int
        required: true
  listens:
    description:
      - The gateway's own listening ports on this host (C(gateway_port), C(gateway_stats_port)). When this host is
        also one of O(hosts), its engine (host network) uses its C(tensorfold_port), and a port of both on overlapping
        addresses is refused (E_SETTINGS).
    type: list
    elements: dict
    default: []
    suboptions:
      what: {description: "The setting's name, for messages.", type: str, required: true}
      bind: {description: The address it listens on (C(*) for every address)., type: str, default: "*"}
      port: {description: The port., type: int, required: true}
  engine_bind:
    description: The address this host's engine listens on (C(tensorfold_host)), when it is one of O(hosts).
    type: str
    default: 0.0.0.0
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
    check=dict(type="dict", options=dict(
        interval=dict(type="float", required=True),
        timeout=dict(type="float", required=True),
        fastinter_ms=dict(type="float", required=True),
        fall=dict(type="int", required=True),
    )),
    listens=dict(type="list", elements="dict", default=[], options=dict(
        what=dict(type="str", required=True),
        bind=dict(type="str", default="*"),
        port=dict(type="int", required=True),
    )),
    engine_bind=dict(type="str", default="0.0.0.0"),
    group=dict(type="str", default="gpu_hosts"),
)


def main():
    refuse_on_host("gateway_plan", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
