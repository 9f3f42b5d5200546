#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_driver_info
short_description: Read the NVIDIA driver's version and say whether it serves CUDA 13
version_added: 0.3.0
description:
  - Runs C(nvidia-smi --query-gpu=driver_version --format=csv,noheader) and keeps the lines that are
    a version (digits and dots); placeholders such as C([N/A]) or C([GPU requires reset]) and
    C(Unable to determine the device handle ...) lines are not versions.
  - Also reads the loaded kernel module's version from C(/proc/driver/nvidia/version), so a host
    whose driver is loaded but whose C(nvidia-smi) is missing or cannot run (Ubuntu's
    nvidia-headless without nvidia-utils) is told apart from a host without a driver.
  - RV(problem) says what is wrong (no driver, nvidia-smi missing, no version reported, a driver
    older than O(min_version)); the module itself does not fail for it, so the caller reports it
    with its own code.
  - Only reads; nothing on the host changes, so check mode gives the same answer.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  min_version:
    description: The oldest driver accepted (C(580) accepts every 580.x).
    type: str
    default: "580"
extends_documentation_fragment:
  - glm53.tensorfold.read_only
"""

EXAMPLES = r"""
- name: Read the NVIDIA driver
  glm53.tensorfold.nvidia_driver_info:
    min_version: "580"
  register: driver

- name: Report a driver CUDA 13 cannot use
  ansible.builtin.fail:
    msg: "{{ driver.problem }} {{ driver.todo | default('', true) }}"
  when: driver.problem
"""

RETURN = r"""
versions:
  description: The driver versions nvidia-smi reported (one per driver, usually one).
  returned: always
  type: list
  elements: str
  sample: ["580.95.05"]
kernel_module:
  description: The version of the loaded NVIDIA kernel module (null when none is loaded).
  returned: always
  type: str
  sample: 580.95.05
kernel_module_flavour:
  description:
    - The flavour of the loaded NVIDIA kernel module, C(open) or C(proprietary) (null when none is loaded).
    - NVIDIA drives Blackwell cards only with the open flavour; with the proprietary one nvidia-smi finds no Blackwell card.
  returned: always
  type: str
  sample: open
nvidia_smi:
  description: The nvidia-smi that was run (null when there is none).
  returned: always
  type: str
  sample: /usr/bin/nvidia-smi
nvidia_smi_rc:
  description: nvidia-smi's exit status (null when it did not run); not C(rc), which would fail the task.
  returned: always
  type: int
  sample: 0
problem:
  description: What makes the driver unusable for CUDA 13, or null.
  returned: always
  type: str
  sample: driver 570.86.15 is older than 580, the first driver for CUDA 13
todo:
  description: What to do about RV(problem), when it differs from the usual advice (install a driver for CUDA 13); else null.
  returned: always
  type: str
  sample: null
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_driver import (
    driver_problem, driver_versions, kernel_module_version)
from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi import kernel_module_flavour

PROC_VERSION = "/proc/driver/nvidia/version"
EXTRA_DIRS = ["/usr/bin", "/usr/local/bin"]


def _not_executable(module):
    """A nvidia-smi file on PATH (or in EXTRA_DIRS) that this user cannot execute, or None."""
    for folder in os.environ.get("PATH", "").split(os.pathsep) + EXTRA_DIRS:
        path = os.path.join(folder or ".", "nvidia-smi")
        if os.path.isfile(path) and not os.access(path, os.X_OK):
            return path
    return None


def main():
    module = AnsibleModule(argument_spec=dict(min_version=dict(type="str", default="580")), supports_check_mode=True)
    kernel = flavour = None
    try:
        with open(PROC_VERSION) as handle:
            proc = handle.read()
        kernel, flavour = kernel_module_version(proc), kernel_module_flavour(proc)
    except (IOError, OSError):
        pass  # no module loaded (or no /proc): kernel stays None
    smi = module.get_bin_path("nvidia-smi", required=False, opt_dirs=EXTRA_DIRS)
    rc, out, err = None, "", ""
    if smi:
        try:
            rc, out, err = module.run_command([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                              environ_update={"LC_ALL": "C"}, handle_exceptions=False)
        except (IOError, OSError) as error:
            smi = "error: %s: %s" % (smi, error.strerror or error)
    else:
        unusable = _not_executable(module)
        smi = "error: %s is not executable" % unusable if unusable else None
    found = driver_problem(smi, rc, out, err, kernel, module.params["min_version"], flavour)
    from_smi = smi is not None and not smi.startswith("error: ")
    module.exit_json(changed=False, versions=(driver_versions(out) if from_smi else []), kernel_module=kernel,
                     kernel_module_flavour=flavour,
                     nvidia_smi=smi if from_smi else None, nvidia_smi_rc=rc,
                     problem=found[0] if found else None, todo=found[1] if found else None)


if __name__ == "__main__":
    main()
