#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_host_verdict
short_description: Read and judge a GPU box's host checks against the recipe, or sum up the fleet's verdicts
version_added: 0.2.0
description:
  - With O(host_resources), runs M(glm53.tensorfold.host_resources) on the host with those options
    (asked with its O(glm53.tensorfold.host_resources#module:docker) and
    O(glm53.tensorfold.host_resources#module:gpus) options it also reads the Docker daemon, the GPUs,
    the driver and peer-to-peer) and judges its answer in the same task, so the host checks cost
    one task per host. That module only reads, so check mode gives the same answer.
  - Without it, judges what was read before - the results of M(glm53.tensorfold.host_resources) in
    O(resources) and M(glm53.tensorfold.gpu_info) (asked with its
    O(glm53.tensorfold.gpu_info#module:p2p_gpus) option) in O(gpu_info).
  - Judges against O(expect) and returns every problem with its code, in the recipe's order of
    checks (platform, tools, Docker daemon, docker group, NVIDIA runtime, GPU count, model and state
    (reachable, no reset needed, MIG off), driver, memory per GPU, compute processes, power cap,
    peer-to-peer, disk, host memory, ports), with the host's status. A GPU value nvidia-smi cannot
    report (C([N/A]), C([Unknown Error])...) is a C(W_GPU_UNREAD) warning, never a silent pass.
  - Shows the problems in its own result - with O(fail) and an error, the task fails with every
    problem's message (each starts with its code and the host); otherwise each problem is a warning
    under the task.
  - The gpu_host_checks role registers its answer as C(gpu_host_checks_result) (C(status),
    C(problems)); the checked GPUs in rank order become the host's fact C(gpu_host_checks_gpus).
  - When the recipe's own container already runs on the host, the GPU memory, busy and port checks
    are left out, since its ranks are what holds them.
  - With O(fleet), judges nothing and sums up the C(gpu_host_checks_result) of the hosts named - one
    line per host, their codes and the counts (a host without a verdict counts as failed).
author:
  - glm53.tensorfold contributors (@glm53)
options:
  host_resources:
    description:
      - Options of M(glm53.tensorfold.host_resources), which this task runs on the host and judges
        (instead of O(resources) and O(gpu_info)); give it O(glm53.tensorfold.host_resources#module:gpus)
        so the GPUs are read too (its answer's C(gpu_info) is judged as O(gpu_info)).
      - When that module fails (it cannot run), this task fails with its message, unjudged.
    type: dict
  resources:
    description: The result of M(glm53.tensorfold.host_resources). Required unless O(host_resources) or O(fleet) is given.
    type: dict
  gpu_info:
    description: The result of M(glm53.tensorfold.gpu_info) (a failed one is an C(E_GPU) problem). Required unless O(host_resources) or O(fleet) is given.
    type: dict
  expect:
    description:
      - What the host must have (the gpu_host_checks role's settings). Each value is converted to
        its type, so text such as C("300") from C(-e) is judged as the number; one left out takes
        the default below.
    type: dict
    default: {}
    suboptions:
      gpu_count:
        description: The host must have at least this many GPUs (default 2).
        type: int
      gpu_indices:
        description: The GPUs to check, rank order (default C([0, 1])).
        type: list
        elements: int
      model_pattern:
        description: Regular expression every checked GPU's name must match (default any).
        type: str
      min_driver:
        description: Oldest NVIDIA driver version accepted (default C("580")).
        type: str
      min_cuda:
        description: Oldest CUDA version the driver must support (default C("13.0")).
        type: str
      min_free_mib:
        description: Free memory each checked GPU needs, MiB (default 88000).
        type: int
      max_used_mib:
        description: Used memory at or above which a GPU is busy, MiB (default 4096).
        type: int
      power_cap_w:
        description: Warn when a checked GPU's power limit is above this, W; 0 or none turns the check off.
        type: float
      p2p:
        description: Check peer-to-peer between the checked GPUs (default true).
        type: bool
      docker:
        description: Run the Docker checks (default true).
        type: bool
      min_host_memory_gib:
        description: Warn below this much available host memory, GiB (default 16).
        type: float
  toolkit_follows:
    description:
      - The nvidia_toolkit step runs on this host later in the same run (site.yml says so; see the
        gpu_host_checks role's C(gpu_host_checks_toolkit_follows)). What it fixes - C(E_DOCKER)
        (Docker missing or its daemon silent) and C(E_NVIDIA_RUNTIME) - is then left to it when
        they are the host's only errors - returned in RV(left_to_toolkit), shown as warnings, the
        status C(warn) - instead of failing the host. C(E_DOCKER_GROUP) is judged even with Docker
        missing, and still fails.
    type: bool
    default: false
  fail:
    description:
      - Fail the task when the host has an error (status C(fail)), its message listing every
        problem. When false, or with warnings only, the problems are the task's warnings.
    type: bool
    default: false
  fleet:
    description: Inventory hosts whose verdicts to sum up instead of judging this host.
    type: list
    elements: str
attributes:
  action:
    description: Judges on the controller; with O(host_resources) it first runs that module on the host.
    support: full
  check_mode:
    description: Only reads, so check mode gives the same answer.
    support: full
  diff_mode:
    description: Returns no diff (nothing changes).
    support: none
"""

EXAMPLES = r"""
- name: Read and judge this host in one task, failing it when it has an error
  glm53.tensorfold.gpu_host_verdict:
    host_resources:
      paths: [{name: checkpoint, path: /srv/glm53/model, need_gib: 180}]
      ports: [8020, 29583, 29584]
      tools: [curl, flock, docker]
      docker: true
      docker_container: glm53-tensorfold
      gpus: {p2p_gpus: [0, 1]}
    expect: {gpu_count: 2, gpu_indices: [0, 1], model_pattern: RTX PRO 6000}
    fail: true
  register: gpu_host_checks_result

- name: Judge what was read before
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
read_with:
  description: How M(glm53.tensorfold.host_resources) read the host, C(box reader) or C(module) (see that module's notes).
  returned: when it read the host (O(host_resources))
  type: str
  sample: box reader
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
left_to_toolkit:
  description:
    - With O(toolkit_follows), the problems left to the nvidia_toolkit step, as records whose
      message says so; empty otherwise, or when the host has another error (then they stay in RV(problems)).
  returned: when judging a host
  type: list
  elements: dict
gpus:
  description: The gpu_info dicts of the checked GPUs, in rank order (those the host has).
  returned: when judging a host
  type: list
  elements: dict
ansible_facts:
  description: C(gpu_host_checks_gpus), the same list as RV(gpus), as a fact of the host.
  returned: when judging a host
  type: dict
warnings:
  description: Every problem's message (those left to the toolkit step too), when the task does not fail.
  returned: when the host has problems and does not fail
  type: list
  elements: str
msg:
  description: Every problem's message, when O(fail) fails the host; or the message of a failed O(host_resources) run.
  returned: on failure
  type: raw
fleet:
  description:
    - The summary - C(lines) (one per host), C(hosts) (each host's C(status), C(codes), C(problems),
      C(left_to_toolkit) (codes)) and C(counts).
  returned: with O(fleet)
  type: dict
  sample: {"lines": ["gpu-a: pass", "gpu-b: warnings (W_P2P)"], "counts": {"pass": 1, "warn": 1, "fail": 0}}
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/gpu_host_verdict.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    host_resources=dict(type="dict"),
    resources=dict(type="dict"),
    gpu_info=dict(type="dict"),
    # Typed, so a value that arrives as text (-e gpu_host_checks_power_cap_w=300) is judged as a number.
    expect=dict(type="dict", default={}, options=dict(
        gpu_count=dict(type="int"),
        gpu_indices=dict(type="list", elements="int"),
        model_pattern=dict(type="str"),
        min_driver=dict(type="str"),
        min_cuda=dict(type="str"),
        min_free_mib=dict(type="int"),
        max_used_mib=dict(type="int"),
        power_cap_w=dict(type="float"),
        p2p=dict(type="bool"),
        docker=dict(type="bool"),
        min_host_memory_gib=dict(type="float"),
    )),
    toolkit_follows=dict(type="bool", default=False),
    fail=dict(type="bool", default=False),
    fleet=dict(type="list", elements="str"),
)


def main():
    refuse_on_host("gpu_host_verdict", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
