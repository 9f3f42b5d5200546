#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_host_verdict
short_description: Judge a GPU box's host checks against the recipe, or sum up the fleet's verdicts
version_added: 0.2.0
description:
  - Judges what the gpu_host_checks role read on a host (the results of
    M(glm53.tensorfold.host_resources) asked with its O(glm53.tensorfold.host_resources#module:docker) option and
    M(glm53.tensorfold.gpu_info) asked with its O(glm53.tensorfold.gpu_info#module:p2p_gpus) option) against O(expect), and returns
    every problem with its code, in the recipe's order of checks (platform, tools, Docker daemon,
    docker group, NVIDIA runtime, GPU count and model, driver, memory per GPU, compute processes,
    power cap, peer-to-peer, disk, host memory, ports), with the host's status.
  - The gpu_host_checks role publishes its answer as C(gpu_host_checks_result) (C(status),
    C(problems)) and C(gpu_host_checks_gpus) (the checked GPUs in rank order).
  - When the recipe's own container already runs on the host, the GPU memory, busy and port checks
    are left out, since its ranks are what holds them.
  - With O(fleet), judges nothing and sums up the C(gpu_host_checks_result) of the hosts named - one
    line per host, their codes and the counts (a host without a result counts as failed).
author:
  - glm53.tensorfold contributors (@glm53)
options:
  resources:
    description: The result of M(glm53.tensorfold.host_resources). Required unless O(fleet) is given.
    type: dict
  gpu_info:
    description: The result of M(glm53.tensorfold.gpu_info) (a failed one is an C(E_GPU) problem). Required unless O(fleet) is given.
    type: dict
  expect:
    description:
      - What the host must have - C(gpu_count), C(gpu_indices), C(model_pattern), C(min_driver),
        C(min_cuda), C(min_free_mib), C(max_used_mib), C(power_cap_w), C(p2p), C(docker),
        C(min_host_memory_gib) (the gpu_host_checks role's settings).
    type: dict
    default: {}
  fleet:
    description: Inventory hosts whose verdicts to sum up instead of judging this host.
    type: list
    elements: str
extends_documentation_fragment:
  - glm53.tensorfold.controller
"""

EXAMPLES = r"""
- name: Judge this host
  glm53.tensorfold.gpu_host_verdict:
    resources: "{{ resources }}"
    gpu_info: "{{ gpu_answer }}"
    expect: {gpu_count: 2, gpu_indices: [0, 1], model_pattern: RTX PRO 6000}

- name: Sum up the fleet
  glm53.tensorfold.gpu_host_verdict:
    fleet: "{{ ansible_play_hosts_all }}"
  register: summary
  run_once: true
"""

RETURN = r"""
status:
  description: C(fail) when any problem is an error, C(warn) when only warnings, else C(pass).
  returned: when judging a host
  type: str
  sample: warn
problems:
  description: Every problem as a record (C(code), C(severity), C(host), C(message) and details).
  returned: when judging a host
  type: list
  elements: dict
gpus:
  description: The gpu_info dicts of the checked GPUs, in rank order (those the host has).
  returned: when judging a host
  type: list
  elements: dict
fleet:
  description: The summary - C(lines) (one per host), C(hosts) (each host's C(status), C(codes), C(problems)) and C(counts).
  returned: with O(fleet)
  type: dict
  sample: {"lines": ["gpu-a: pass", "gpu-b: warnings (W_P2P)"], "counts": {"pass": 1, "warn": 1, "fail": 0}}
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/gpu_host_verdict.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    resources=dict(type="dict"),
    gpu_info=dict(type="dict"),
    expect=dict(type="dict", default={}),
    fleet=dict(type="list", elements="str"),
)


def main():
    refuse_on_host("gpu_host_verdict", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
