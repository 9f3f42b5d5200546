#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_info
short_description: Read the NVIDIA GPUs of a host, their memory and the processes on them
version_added: 0.1.0
description:
  - Asks C(nvidia-smi) for every GPU's index, UUID, name, PCI bus id, memory (total, used, free),
    compute capability, power limit and MIG mode, for the compute processes on each GPU, and for
    the driver and CUDA versions.
  - A GPU nvidia-smi cannot reach (it prints C(Unable to determine the device handle for GPU...)
    instead of its row) is left out of RV(gpus), listed in RV(unreachable) and warned about; the
    other GPUs are still read.
  - Only reads; it never changes the host, so check mode gives the same answer.
  - Fails with a clear message when C(nvidia-smi) is missing, exits non-zero (for example exit
    status 6, "No devices were found", or 9 when the driver is not loaded), or when a GPU index
    in O(gpus) does not exist on the host.
extends_documentation_fragment:
  - glm53.tensorfold.read_only
  - glm53.tensorfold.read_only.nvidia_smi
  - glm53.tensorfold.read_only.box_reader
author:
  - glm53.tensorfold contributors (@glm53)
options:
  gpus:
    description:
      - GPU indices (nvidia-smi numbering) to return, in this order (rank order).
      - When empty, every GPU of the host is returned in index order.
    type: list
    elements: int
    default: []
  p2p_gpus:
    description:
      - Also read peer-to-peer between these GPU indices (what M(glm53.tensorfold.gpu_peer_info)
        reads) in the same call, so the host checks need one module run per host for the GPUs.
      - Read only when at least two distinct indices are given and every one of them exists;
        otherwise RV(peer) says why it was skipped. A peer-to-peer matrix that cannot be read never
        fails the module (RV(peer.failed) with the reason), since peer-to-peer is a warning, not an error.
    type: list
    elements: int
    default: []
notes:
  - Versions are read from C(--query-gpu=driver_version) and C(nvidia-smi --version), not from the
    banner, whose labels changed in the 610 driver series (C(KMD Version), C(CUDA UMD Version)).
seealso:
  - module: glm53.tensorfold.gpu_peer_info
"""

EXAMPLES = r"""
- name: Read every GPU
  glm53.tensorfold.gpu_info:
  register: gpu

- name: Read the two GPUs the ranks use, in rank order
  glm53.tensorfold.gpu_info:
    gpus: [0, 1]
  register: gpu

- name: Show the free memory of rank 0's GPU
  ansible.builtin.debug:
    msg: "{{ gpu.gpus[0].name }} has {{ gpu.gpus[0].memory_free_mib }} MiB free"
"""

RETURN = r"""
read_with:
  description: Which answered, C(box reader) (the host's Python ran the module's code, no AnsiballZ) or C(module).
  returned: when run by its action
  type: str
  sample: box reader
gpus:
  description:
    - One dict per selected GPU, in the order asked (index order when O(gpus) is empty).
    - A value nvidia-smi prints a placeholder for (C([N/A]), C([Not Supported]), C([Unknown Error]),
      C([GPU requires reset]), any C([...])) is null; RV(gpus[].placeholders) keeps the text.
  returned: success
  type: list
  elements: dict
  contains:
    index:
      description: The GPU's index in nvidia-smi numbering.
      type: int
      sample: 0
    uuid:
      description: The GPU's UUID.
      type: str
      sample: GPU-3b1f0c52-9d4e-4a71-8c2e-5f6a7b8c9d01
    name:
      description: The product name.
      type: str
      sample: NVIDIA RTX PRO 6000 Blackwell Workstation Edition
    pci_bus_id:
      description: The PCI bus id.
      type: str
      sample: "00000000:01:00.0"
    memory_total_mib:
      description: Total memory in MiB.
      type: int
      sample: 97887
    memory_used_mib:
      description: Used memory in MiB.
      type: int
      sample: 2
    memory_free_mib:
      description: Free memory in MiB.
      type: int
      sample: 97250
    compute_cap:
      description: The compute capability.
      type: str
      sample: "12.0"
    power_limit_w:
      description: The enforced power limit in watts.
      type: float
      sample: 400.0
    mig_mode:
      description: The current MIG mode, C(Enabled) or C(Disabled); null on a card without MIG.
      type: str
      sample: Disabled
    compute_mode:
      description: >-
        The compute mode, C(Default), C(Exclusive_Process) or C(Prohibited) (C(nvidia-smi -c)); null when nvidia-smi
        does not report it.
      type: str
      sample: Default
    persistence_mode:
      description: >-
        The persistence mode, C(Enabled) or C(Disabled). Without it the driver forgets the card's power limit and
        compute mode once no process uses it.
      type: str
      sample: Enabled
    placeholders:
      description: What nvidia-smi printed instead of a value, per query field (empty when every value was read).
      type: dict
      sample: {"memory.used": "[Unknown Error]", "mig.mode.current": "[N/A]"}
    processes:
      description: The compute processes on this GPU.
      type: list
      elements: dict
      contains:
        pid:
          description: Process id.
          type: int
        name:
          description: Process name as nvidia-smi prints it.
          type: str
        used_memory_mib:
          description: GPU memory the process holds, in MiB (null when not reported).
          type: int
      sample: [{"pid": 473, "name": "python3", "used_memory_mib": 20998}]
unreachable:
  description: The GPUs nvidia-smi printed an error for instead of a row, by PCI bus id as it printed it.
  returned: when nvidia-smi cannot reach a GPU
  type: list
  elements: dict
  sample: [{"pci_bus_id": "0000:41:00.0", "error": "Unknown Error"}]
driver_version:
  description: The NVIDIA driver version.
  returned: success
  type: str
  sample: 580.159.04
cuda_version:
  description: The highest CUDA version the driver supports (null when nvidia-smi does not say).
  returned: success
  type: str
  sample: "13.0"
peer:
  description:
    - Peer-to-peer between O(p2p_gpus), as M(glm53.tensorfold.gpu_peer_info) returns it (RV(peer.read),
      RV(peer.write), RV(peer.peer_ok)) plus RV(peer.warning); or RV(peer.skipped) / RV(peer.failed)
      with RV(peer.msg).
  returned: when O(p2p_gpus) is set
  type: dict
  contains:
    read:
      description: Read status per pair, keyed C(A-B).
      type: dict
    write:
      description: Write status per pair, keyed C(A-B).
      type: dict
    peer_ok:
      description: True when every pair reads and writes.
      type: bool
    warning:
      description: What is wrong with peer-to-peer, or null.
      type: str
    skipped:
      description: True when fewer than two of the wanted GPUs exist; nothing was asked.
      type: bool
    failed:
      description: True when nvidia-smi could not answer; the rest of the result stands.
      type: bool
    msg:
      description: Why it was skipped or failed.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi_command import gpu_info_main


ARGUMENT_SPEC = dict(
    nvidia_smi=dict(type="path"),
    gpus=dict(type="list", elements="int", default=[]),
    p2p_gpus=dict(type="list", elements="int", default=[]),
)


def main():
    # Its action (plugins/action/gpu_info.py) runs the same gpu_info_main on the host without this
    # module where the connection pipelines.
    gpu_info_main(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
