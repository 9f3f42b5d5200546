# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Finding and running nvidia-smi from a module, with failures that say what to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import threading

from ansible_collections.glm53.tensorfold.plugins.module_utils import box_module
from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi as smi
from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi import command_failure

# Every module_utils file gpu_info_on_box imports, itself first: what the box reader sends.
READER_MODULES = ("nvidia_smi_command", "box_module", "nvidia_smi")
# Where the driver puts nvidia-smi, searched before PATH (a module's PATH may lack them).
NVIDIA_SMI_DIRS = ["/usr/bin", "/usr/local/bin"]
# The loaded kernel module's version line (read when nvidia-smi sees no GPU: which flavour it is).
PROC_VERSION = "/proc/driver/nvidia/version"
# What read_cards asks: enough to pin the ranks' cards and name the fit key's GPU.
CARD_FIELDS = ("index", "uuid", "name", "memory.total")


def find_nvidia_smi(module, given=None):
    """The nvidia-smi to run: ``given`` (else the module's ``nvidia_smi`` option), else the one on
    PATH; fails when absent."""
    given = given or module.params.get("nvidia_smi")
    if given:
        if os.path.isfile(given) and os.access(given, os.X_OK):
            return given
        module.fail_json(msg="nvidia-smi not found at %s (the nvidia_smi option): install the NVIDIA "
                             "driver or point nvidia_smi at its nvidia-smi." % given)
    found = module.get_bin_path("nvidia-smi", required=False, opt_dirs=NVIDIA_SMI_DIRS)
    if not found:
        module.fail_json(msg="nvidia-smi is not on PATH: install the NVIDIA driver (it brings "
                             "nvidia-smi) or set the nvidia_smi option to its path.")
    return found


def read_cards(module):
    """Every card of the host (index, uuid, name, memory) from one nvidia-smi call, for a start the
    host checks did not precede; [] when nvidia-smi is missing, fails or answers what cannot be
    read, never a failure: the caller then pins the cards by index."""
    binary = module.get_bin_path("nvidia-smi", required=False, opt_dirs=NVIDIA_SMI_DIRS)
    if not binary:
        return []
    rc, out, _err = module.run_command([binary, "--query-gpu=" + ",".join(CARD_FIELDS), "--format=csv,noheader,nounits"],
                                       environ_update={"LC_ALL": "C"})
    try:
        return smi.parse_gpu_answer(out, fields=CARD_FIELDS)["gpus"] if rc == 0 else []
    except smi.NvidiaSmiParseError:
        return []


def ask_at_once(module, binary, arg_lists):
    """Run independent nvidia-smi reads side by side: each can take a second or more on a host
    without persistence mode (the driver starts up for every call). Returns ``{tuple(args): (rc,
    out, err)}`` for the calls that ran; one that raised is left out, so asking it again in the
    module's own thread raises there (or fails the module the usual way). Plain threads, not
    concurrent.futures: its import (logging with it) cost every read on the host about 4 ms."""
    answers, ended = {}, []

    def one(args):
        try:
            answers[tuple(args)] = module.run_command([binary] + list(args), environ_update={"LC_ALL": "C"})
        except Exception:  # pylint: disable=broad-except  # asked again below, where it fails properly
            pass
        except BaseException as exc:  # pylint: disable=broad-except  # fail_json's SystemExit: the module's answer is out
            ended.append(exc)

    threads = [threading.Thread(target=one, args=(args,)) for args in arg_lists]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if ended:  # a thread ends only itself: the module ends here, as it would have in its own thread
        raise ended[0]
    return answers


def _answer(module, argv, answers):
    known = (answers or {}).get(tuple(argv[1:]))
    return known if known is not None else module.run_command(argv, environ_update={"LC_ALL": "C"})


def run_nvidia_smi(module, binary, args, answers=None):
    """stdout of ``binary args...`` (from ``answers`` when asked already); fails the module with the
    command, exit status and message."""
    argv = [binary] + list(args)
    rc, out, err = _answer(module, argv, answers)
    if rc != 0:
        module.fail_json(msg=command_failure(["nvidia-smi"] + list(args), rc, out, err),
                         rc=rc, stdout=out, stderr=err, cmd=argv)
    return out


def _kernel_module(rc):
    """With exit 6 (the driver sees no GPU), ``{"kernel_module_flavour": ...}`` of the loaded module:
    the proprietary flavour loads but takes no Blackwell card. Else, or unreadable, nothing."""
    if rc != 6:
        return {}
    try:
        with open(PROC_VERSION) as handle:
            return {"kernel_module_flavour": smi.kernel_module_flavour(handle.read())}
    except (IOError, OSError):
        return {}


def _warning_line(line):
    return line.strip().upper().startswith("WARNING:")


def read_rows(module, binary, args, parse, answers=None):
    """``parse`` of what ``binary args...`` printed (a --query answer). nvidia-smi's exit status is
    not all or nothing: with a GPU fallen off the bus (exit 15) it still prints the rows of the GPUs
    it reached and a line for the one it could not, and with a corrupted infoROM (14) every row and
    a ``WARNING:`` line. Such an answer is read, with a warning; ``WARNING:`` lines become warnings
    (they are no rows). A failure of the driver itself, or one that printed no row, fails the module
    as run_nvidia_smi does. NvidiaSmiParseError comes from an answer of exit 0 that cannot be read."""
    argv = [binary] + list(args)
    rc, out, err = _answer(module, argv, answers)
    lines = (out or "").splitlines()
    for line in lines:
        if _warning_line(line):
            module.warn("nvidia-smi %s: %s" % (args[0].split("=")[0], line.strip()))
    text = "\n".join(line for line in lines if not _warning_line(line))
    if rc == 0:
        return parse(text)
    parsed = None
    if smi.driver_failure(rc, out, err) is None:
        try:
            parsed = parse(text)
        except smi.NvidiaSmiParseError:
            parsed = None
    rows = parsed.get("gpus") if isinstance(parsed, dict) else parsed
    if parsed is None or not (rows or smi.split_device_errors(text)[1]):
        module.fail_json(msg=command_failure(["nvidia-smi"] + list(args), rc, out, err),
                         rc=rc, stdout=out, stderr=err, cmd=argv, **_kernel_module(rc))
    module.warn("nvidia-smi %s exited with status %s; what it printed is read (%s)"
                % (args[0].split("=")[0], rc, " ".join((err or "").split()) or "no message"))
    return parsed


# Peer-to-peer read and write status between every pair of GPUs.
P2P_QUERIES = (["topo", "-p2p", "r"], ["topo", "-p2p", "w"])


class P2PUnreadable(Exception):
    """nvidia-smi could not say whether the GPUs reach each other; ``details`` for fail_json."""

    def __init__(self, msg, **details):
        super(P2PUnreadable, self).__init__(msg)
        self.details = details


def read_p2p(module, binary, gpus, answers=None):
    """Peer-to-peer between ``gpus`` (every GPU when empty), read and write:
    ``{read, write, peer_ok, warning}``. Raises P2PUnreadable with the reason instead of failing, so
    a caller that only warns about peer-to-peer (gpu_info's ``p2p_gpus``) goes on."""

    def ask(args):
        argv = [binary] + list(args)
        rc, out, err = _answer(module, argv, answers)
        if rc != 0:
            raise P2PUnreadable(command_failure(["nvidia-smi"] + list(args), rc, out, err),
                                rc=rc, stdout=out, stderr=err, cmd=argv)
        return out

    try:
        present, read_matrix = smi.parse_p2p_table(ask(P2P_QUERIES[0]))
        write_text = ask(P2P_QUERIES[1])
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


def read_gpu_info(module, nvidia_smi=None, gpus=None, p2p_gpus=None):
    """gpu_info's answer (``gpus``, ``driver_version``, ``cuda_version``, with ``p2p_gpus`` also
    ``peer``, and ``unreachable`` when nvidia-smi cannot reach a GPU: its PCI bus id): every GPU,
    its memory and compute processes, the driver and CUDA versions. A missing
    nvidia-smi, a failed call or a GPU index the host lacks fails ``module`` (``module.fail_json``)."""
    binary = find_nvidia_smi(module, nvidia_smi)
    gpu_query = ["--query-gpu=" + ",".join(smi.GPU_QUERY_FIELDS), "--format=csv,noheader,nounits"]
    app_query = ["--query-compute-apps=" + ",".join(smi.APP_QUERY_FIELDS), "--format=csv,noheader,nounits"]
    answers = ask_at_once(module, binary, [gpu_query, app_query, ["--version"]] + (list(P2P_QUERIES) if p2p_gpus else []))
    try:
        answer = read_rows(module, binary, gpu_query, smi.parse_gpu_answer, answers)
        apps = read_rows(module, binary, app_query, smi.parse_compute_apps, answers)
    except smi.NvidiaSmiParseError as err:
        module.fail_json(msg="could not read nvidia-smi's answer: %s" % err)
    found, unreachable = answer["gpus"], answer["unreachable"]
    for gpu in unreachable:
        module.warn("nvidia-smi cannot reach the GPU at PCI %s (%s): it is left out of the GPUs."
                    % (gpu["pci_bus_id"], gpu["error"]))
    smi.attach_processes(found, apps)
    driver = found[0]["driver_version"] if found else None
    for gpu in found:
        gpu.pop("driver_version", None)  # one driver per host: returned once, below
    try:
        selected = smi.select_gpus(found, gpus or [])
    except KeyError as err:
        have = ", ".join("%d (%s)" % (g["index"], g["name"]) for g in found) or "none"
        lost = "".join("; nvidia-smi cannot reach the GPU at PCI %s (%s)" % (g["pci_bus_id"], g["error"])
                       for g in unreachable)
        module.fail_json(msg="GPU index %s not found: this host has %d GPU(s): %s%s." % (
            ", ".join(str(i) for i in err.args[0]), len(found), have, lost), gpus=found, unreachable=unreachable)
    version_text = run_nvidia_smi(module, binary, ["--version"], answers)
    cuda = smi.parse_cuda_version(version_text)
    if cuda is None:  # older drivers: --version has no CUDA line; the banner has
        cuda = smi.parse_cuda_version(run_nvidia_smi(module, binary, []))
    driver = driver or smi.parse_driver_version(version_text)
    result = dict(gpus=selected, driver_version=driver, cuda_version=cuda)
    if unreachable:
        result["unreachable"] = unreachable
    if p2p_gpus:
        result["peer"] = peer_between(module, binary, p2p_gpus, [g["index"] for g in found], answers)
    return result


def peer_between(module, binary, wanted, present, answers=None):
    """Peer-to-peer between the wanted GPUs when it can be asked; skipped or failed says why not."""
    missing = [index for index in wanted if index not in present]
    if len(set(wanted)) < 2 or missing:
        return {"skipped": True, "msg": "GPU(s) %s not on this host" % missing if missing
                else "peer-to-peer needs two GPUs"}
    try:
        peer = read_p2p(module, binary, wanted, answers)
    except P2PUnreadable as err:
        return {"failed": True, "msg": str(err)}
    if peer["warning"]:
        module.warn(peer["warning"])
    return peer


class ModuleFailed(Exception):
    """What ``fail_json`` was called with, by a part of a module that answers for it (SoftFail)."""

    def __init__(self, result):
        super(ModuleFailed, self).__init__(result.get("msg", ""))
        self.result = result


class SoftFail(object):
    """The module for one part of a combined read: the same module, but ``fail_json`` raises
    ModuleFailed, so the other parts' answers are still returned (host_resources' ``gpus``)."""

    def __init__(self, module):
        self._module = module

    def fail_json(self, **result):
        raise ModuleFailed(result)

    def __getattr__(self, name):
        return getattr(self._module, name)


def gpu_info_main(module):
    """gpu_info's work on the host: ``module`` is its AnsibleModule, or box_module's stand-in."""
    params = module.params
    module.exit_json(changed=False, **read_gpu_info(module, params["nvidia_smi"], params["gpus"], params["p2p_gpus"]))


def gpu_info_on_box(params):
    """gpu_info's answer, run by the box reader with the host's Python."""
    return box_module.answer(gpu_info_main, params)
