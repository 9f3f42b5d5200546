# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes of the read-only *_info modules: the same answer in check mode, no diff.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return the same answer (it only reads).
    support: full
  diff_mode:
    description: Returns no diff (nothing changes).
    support: none
"""

    # The nvidia-smi program the GPU modules read.
    NVIDIA_SMI = r"""
options:
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) program.
      - When not set, C(nvidia-smi) is looked up on E(PATH) (and in C(/usr/bin), C(/usr/local/bin)).
    type: path
"""
