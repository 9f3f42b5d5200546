# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The NVIDIA driver's version, from ``nvidia-smi --query-gpu=driver_version --format=csv,noheader``
(one line per GPU) or, when nvidia-smi cannot run, from the loaded kernel module
(``/proc/driver/nvidia/version``), and what is wrong with it for CUDA 13.

nvidia-smi prints other lines among the versions: placeholders (``[N/A]``, ``[GPU requires reset]``)
and ``Unable to determine the device handle for GPU...: Unknown Error``. Only lines that are a
version (digits and dots) count.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi import driver_failure

_DRIVER_VERSION = re.compile(r"^\d+(\.\d+)+$")


def driver_versions(text):
    """The driver versions among nvidia-smi's lines, in its order, each once."""
    versions = []
    for line in (text or "").splitlines():
        line = line.strip()
        if _DRIVER_VERSION.match(line) and line not in versions:
            versions.append(line)
    return versions


def kernel_module_version(text):
    """The version in ``/proc/driver/nvidia/version``'s ``NVRM version:`` line, or None.

    ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (...)``
    and ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 ...``: the first
    word that is a version (x86_64 and the date's words are not)."""
    for line in (text or "").splitlines():
        if line.startswith("NVRM version:"):
            for word in line[len("NVRM version:"):].split():
                if _DRIVER_VERSION.match(word):
                    return word
    return None


def _numbers(version):
    return tuple(int(part) for part in re.findall(r"\d+", version or ""))


def older_than(version, minimum):
    """True when ``version`` (580.95.05) comes before ``minimum`` (580: any 580.x is not older)."""
    wanted = _numbers(minimum)
    return _numbers(version)[:len(wanted)] < wanted


def driver_problem(smi, rc, out, err, kernel_version, minimum, kernel_flavour=None):
    """``(what, todo)`` for a driver that cannot be used for CUDA 13, or None when it can.

    ``smi`` is nvidia-smi's path, None when it is not there, or ``"error: ..."`` when it is there
    but cannot run (not executable, or the system refused to start it); ``rc``/``out``/``err`` are
    its answer; ``kernel_version`` is the loaded kernel module's version or None, ``kernel_flavour``
    its flavour (nvidia_smi.kernel_module_flavour). ``todo`` None means the code's usual advice."""
    if smi is None or smi.startswith("error: "):
        cause = "nvidia-smi is not installed (not on PATH)" if smi is None else "nvidia-smi cannot run (%s)" % smi[7:]
        if kernel_version is None:
            if smi is None:
                # The way it was always put: nothing says a driver is there.
                return "nvidia-smi cannot be run here: no NVIDIA driver is installed", None
            return "%s, and no NVIDIA kernel module is loaded (no /proc/driver/nvidia/version)" % cause, None
        branch = kernel_version.split(".")[0]
        what = "%s while the NVIDIA kernel driver %s is loaded (/proc/driver/nvidia/version)" % (cause, kernel_version)
        if older_than(kernel_version, minimum):
            what += "; that driver is also older than %s, the first driver for CUDA 13" % minimum
            return what, ("Install an NVIDIA driver for CUDA 13 (%s or newer) with its utilities "
                          "(on Ubuntu nvidia-utils-BRANCH, on Debian nvidia-smi), then reboot." % minimum)
        return what, ("Install the nvidia-smi of driver %s: on Ubuntu the package nvidia-utils-%s "
                      "(nvidia-utils-%s-server with a -server driver), on Debian nvidia-smi; with NVIDIA's "
                      ".run installer, run that version's installer again." % (kernel_version, branch, branch))
    versions = driver_versions(out)
    if not versions:
        said = " ".join(part for part in ((err or "").strip(), (out or "").strip()) if part)
        what = "nvidia-smi did not report a driver (exit %s: %s)" % (rc, " ".join(said.split()) or "no output")
        known = driver_failure(rc, out, err)
        todo = None
        if known:
            what, todo = "%s: %s" % (what, known[0]), known[1]
        elif rc == 6 and kernel_version is not None:
            todo = ("Check that the cards are seated and powered and that the driver took them (lspci -k names the "
                    "driver in use; dmesg shows the driver's messages), then run again.")
        if kernel_version is not None:
            what += "; the loaded kernel driver is %s" % kernel_version
            old_too = older_than(kernel_version, minimum)
            if rc == 6 and not known and kernel_flavour == "proprietary":
                what += (", NVIDIA's proprietary kernel module, which takes no Blackwell card (NVIDIA drives the RTX PRO "
                         "6000 Blackwell only with its open kernel modules)")
                branch = minimum.split(".")[0] if old_too else kernel_version.split(".")[0]
                todo = ("Install the open kernel modules of a driver for CUDA 13 in place of the proprietary ones (on "
                        "Ubuntu nvidia-driver-%s-open, or nvidia-driver-%s-server-open; from NVIDIA's repository "
                        "nvidia-open), then reboot." % (branch, branch))
            if old_too:
                what += ", older than %s, the first driver for CUDA 13" % minimum
                if kernel_flavour != "proprietary" or rc != 6 or known:
                    todo = None  # the usual advice: install a driver for CUDA 13
        return what, todo
    old = [version for version in versions if older_than(version, minimum)]
    if old:
        return "driver %s is older than %s, the first driver for CUDA 13" % (old[0], minimum), None
    return None
