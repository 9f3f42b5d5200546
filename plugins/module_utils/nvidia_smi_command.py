# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Finding and running nvidia-smi from a module, with failures that say what to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi as smi
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


class P2PUnreadable(Exception):
    """nvidia-smi could not say whether the GPUs reach each other; ``details`` for fail_json."""

    def __init__(self, msg, **details):
        super(P2PUnreadable, self).__init__(msg)
        self.details = details


def read_p2p(module, binary, gpus):
    """Peer-to-peer between ``gpus`` (every GPU when empty), read and write:
    ``{read, write, peer_ok, warning}``. Raises P2PUnreadable with the reason instead of failing, so
    a caller that only warns about peer-to-peer (gpu_info's ``p2p_gpus``) goes on."""

    def ask(args):
        argv = [binary] + list(args)
        rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
        if rc != 0:
            raise P2PUnreadable(command_failure(["nvidia-smi"] + list(args), rc, out, err),
                                rc=rc, stdout=out, stderr=err, cmd=argv)
        return out

    try:
        present, read_matrix = smi.parse_p2p_table(ask(["topo", "-p2p", "r"]))
        write_text = ask(["topo", "-p2p", "w"])
        write_matrix = smi.parse_p2p_matrix(write_text)
    except smi.NvidiaSmiParseError as err:
        raise P2PUnreadable("could not read nvidia-smi's peer-to-peer matrix: %s" % err)
    selected = gpus or present
    missing = [index for index in selected if index not in present]
    if missing:
        raise P2PUnreadable("GPU index %s not found: nvidia-smi lists GPU(s) %s." % (
            ", ".join(str(i) for i in missing), ", ".join(str(i) for i in present) or "none"))
    if len(set(selected)) < 2:
        raise P2PUnreadable("peer-to-peer needs at least two GPUs: %s selected, and this host has %d "
                            "GPU(s) (%s)." % (len(set(selected)), len(present),
                                              ", ".join("GPU %d" % i for i in present) or "none"))
    read = smi.pair_statuses(read_matrix, selected)
    write = smi.pair_statuses(write_matrix, selected)
    warning = smi.p2p_warning(read, write, smi.parse_legend(write_text))
    return {"read": read, "write": write, "peer_ok": warning is None, "warning": warning}
