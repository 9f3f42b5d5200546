# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Finding and running nvidia-smi from a module, with failures that say what to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi import command_failure


def find_nvidia_smi(module):
    """The nvidia-smi to run: the ``nvidia_smi`` option, else the one on PATH; fails when absent."""
    given = module.params.get("nvidia_smi")
    if given:
        if os.path.isfile(given) and os.access(given, os.X_OK):
            return given
        module.fail_json(msg="nvidia-smi not found at %s (the nvidia_smi option): install the NVIDIA "
                             "driver or point nvidia_smi at its nvidia-smi." % given)
    found = module.get_bin_path("nvidia-smi", required=False, opt_dirs=["/usr/bin", "/usr/local/bin"])
    if not found:
        module.fail_json(msg="nvidia-smi is not on PATH: install the NVIDIA driver (it brings "
                             "nvidia-smi) or set the nvidia_smi option to its path.")
    return found


def run_nvidia_smi(module, binary, args):
    """stdout of ``binary args...``; fails the module with the command, exit status and message."""
    argv = [binary] + list(args)
    rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg=command_failure(["nvidia-smi"] + list(args), rc, out, err),
                         rc=rc, stdout=out, stderr=err, cmd=argv)
    return out
