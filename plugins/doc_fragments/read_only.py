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

    # The readers the box reader runs (plugin_utils/box_reader.py): converged_info, gpu_info, host_resources.
    BOX_READER = r"""
options: {}
notes:
  - "Where the connection pipelines, the module's action (for host_resources, that of
    M(glm53.tensorfold.gpu_host_verdict)) runs the same code with the host's own Python and no
    AnsiballZ: the program and its options go on standard input, as a pipelined module's do; it
    costs the host about a quarter of a module run's CPU. The Python is C(ansible_python_interpreter),
    the one discovered earlier in the run, or C(python3) from E(PATH) (not for host_resources, which
    reports on the modules' own Python: its module runs then). Without pipelining, without
    such a Python, or with a path option that holds C(~) or C($), the module runs as any other, with
    the same answer; C(read_with) in the result says which of the two (C(box reader) or C(module)) answered."
"""
