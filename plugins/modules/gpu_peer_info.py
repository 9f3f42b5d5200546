#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_peer_info
short_description: Report peer-to-peer read and write support between NVIDIA GPUs
version_added: 0.1.0
description:
  - Reads C(nvidia-smi topo -p2p r) and C(nvidia-smi topo -p2p w) and returns the status NVML
    reports for every ordered pair of the selected GPUs.
  - Missing peer-to-peer is a warning (the recipe's C(W_P2P)), never a failure; NCCL still works
    over host memory, only more slowly.
  - Fails when C(nvidia-smi) is missing or exits non-zero, when a selected GPU is not in the
    matrix, or when fewer than two GPUs are selected (or present, when O(gpus) is empty).
  - Only reads; check mode gives the same answer.
extends_documentation_fragment:
  - glm53.tensorfold.read_only
  - glm53.tensorfold.read_only.nvidia_smi
author:
  - glm53.tensorfold contributors (@glm53)
options:
  gpus:
    description:
      - GPU indices (nvidia-smi numbering) in rank order; at least two.
      - When empty, every GPU of the host is checked.
    type: list
    elements: int
    default: []
seealso:
  - module: glm53.tensorfold.gpu_info
"""

EXAMPLES = r"""
- name: Check peer-to-peer between the ranks' GPUs
  glm53.tensorfold.gpu_peer_info:
    gpus: [0, 1]
  register: p2p

- name: Say which pairs lack it
  ansible.builtin.debug:
    msg: "{{ p2p.read }} / {{ p2p.write }}"
  when: not p2p.peer_ok
"""

RETURN = r"""
read:
  description: Status of peer-to-peer reads for each ordered pair C("i-j") of the selected GPUs
    (C(OK), C(CNS), C(GNS), C(TNS), C(NS), C(DR) or C(U)).
  returned: success
  type: dict
  sample: {"0-1": "OK", "1-0": "OK"}
write:
  description: Status of peer-to-peer writes for each ordered pair, as for RV(read).
  returned: success
  type: dict
  sample: {"0-1": "CNS", "1-0": "CNS"}
peer_ok:
  description: True when every pair is C(OK) for both reads and writes.
  returned: success
  type: bool
  sample: true
warnings:
  description: The C(W_P2P) text naming each pair without peer-to-peer and its statuses
    (empty when RV(peer_ok)).
  returned: when peer-to-peer is missing
  type: list
  elements: str
  sample:
    - "[W_P2P] NVML reports no peer-to-peer between the cards (IOMMU/ACS, BIOS): GPU 0 -> GPU 1:
      read CNS (Chipset not supported), write CNS (Chipset not supported); GPU 1 -> GPU 0: read CNS
      (Chipset not supported), write CNS (Chipset not supported). NCCL still works over host memory,
      but more slowly."
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi_command import (
    P2PUnreadable,
    find_nvidia_smi,
    read_p2p,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            gpus=dict(type="list", elements="int", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        peer = read_p2p(module, find_nvidia_smi(module), module.params["gpus"])
    except P2PUnreadable as err:
        module.fail_json(msg=str(err), **err.details)
    if peer["warning"]:
        module.warn(peer["warning"])
    module.exit_json(changed=False, read=peer["read"], write=peer["write"], peer_ok=peer["peer_ok"])


if __name__ == "__main__":
    main()
