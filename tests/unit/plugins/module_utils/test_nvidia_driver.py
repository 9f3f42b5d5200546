# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_driver
from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi as smi

OPEN_MODULE = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
               "(dvs-builder@U16-I3-B03-4-3)  Thu Sep 25 18:55:19 UTC 2025\n"
               "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")
PROPRIETARY_MODULE = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 23 22:46:20 UTC 2025\n"
                      "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


def test_only_version_lines_count_as_driver_versions():
    out = ("580.95.05\n[N/A]\n[GPU requires reset]\n"
           "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n 580.95.05 \r\n")
    assert nvidia_driver.driver_versions(out) == ["580.95.05"]
    assert nvidia_driver.driver_versions("[N/A]\n") == []


@pytest.mark.parametrize("out", ["[N/A]\n", "[GPU requires reset]\n[GPU requires reset]\n",
                                 "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n"])
def test_placeholders_alone_are_no_driver_and_quote_what_nvidia_smi_printed(out):
    what, todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 0, out, "", None, "580")
    assert what == "nvidia-smi did not report a driver (exit 0: %s)" % " ".join(out.split())
    assert todo is None


def test_a_placeholder_beside_a_version_leaves_the_version_judged():
    assert nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 0, "[N/A]\n580.95.05\n", "", None, "580") is None
    what, dummy = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 0, "[N/A]\n570.86.15\n", "", None, "580")
    assert what == "driver 570.86.15 is older than 580, the first driver for CUDA 13"


def test_a_failing_nvidia_smi_is_quoted():
    what, dummy = nvidia_driver.driver_problem(
        "/usr/bin/nvidia-smi", 9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "",
        None, "580")
    assert what.startswith("nvidia-smi did not report a driver (exit 9: NVIDIA-SMI has failed")


@pytest.mark.parametrize("version, older", [("580.95.05", False), ("580", False), ("590.44.01", False),
                                            ("1000.10", False), ("575.57.08", True), ("570.211.01", True)])
def test_older_than_compares_numbers_not_text(version, older):
    assert nvidia_driver.older_than(version, "580") is older


def test_the_loaded_kernel_modules_version_is_read_from_both_shapes():
    assert nvidia_driver.kernel_module_version(OPEN_MODULE) == "580.95.05"
    assert nvidia_driver.kernel_module_version(PROPRIETARY_MODULE) == "570.86.15"
    assert nvidia_driver.kernel_module_version("") is None
    assert nvidia_driver.kernel_module_version("GCC version: 12.2.0\n") is None


def test_missing_nvidia_smi_with_a_loaded_driver_says_what_to_install():
    what, todo = nvidia_driver.driver_problem(None, None, "", "", "580.95.05", "580")
    assert what == ("nvidia-smi is not installed (not on PATH) while the NVIDIA kernel driver 580.95.05 is loaded "
                    "(/proc/driver/nvidia/version)")
    assert "nvidia-utils-580" in todo and "nvidia-utils-580-server" in todo and "on Debian nvidia-smi" in todo


def test_an_nvidia_smi_that_cannot_run_with_a_loaded_old_driver_names_both():
    what, todo = nvidia_driver.driver_problem("error: /usr/bin/nvidia-smi is not executable", None, "", "", "570.86.15", "580")
    assert what.startswith("nvidia-smi cannot run (/usr/bin/nvidia-smi is not executable) while the NVIDIA kernel driver "
                           "570.86.15 is loaded")
    assert "older than 580" in what and "580 or newer" in todo


def test_no_nvidia_smi_and_no_kernel_module_is_no_driver():
    assert nvidia_driver.driver_problem(None, None, "", "", None, "580") == (
        "nvidia-smi cannot be run here: no NVIDIA driver is installed", None)


MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.82\n"


def test_a_driver_library_mismatch_says_reboot_not_install():
    what, todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 18, MISMATCH, "", "575.57.08", "580")
    assert what.startswith("nvidia-smi did not report a driver (exit 18: Failed to initialize NVML")
    assert "different versions" in what and "the loaded kernel driver is 575.57.08, older than 580" in what
    assert todo is None  # the loaded module is too old as well: the usual advice (install one for CUDA 13)
    what, todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 18, MISMATCH, "", "580.82.07", "580")
    assert todo.startswith("Reboot the host") and what.endswith("the loaded kernel driver is 580.82.07")


def test_no_gpu_seen_with_a_current_kernel_driver_is_not_told_to_install_a_driver():
    what, todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 6, "No devices were found\n", "", "580.65.06", "580")
    assert what == ("nvidia-smi did not report a driver (exit 6: No devices were found); the loaded kernel driver "
                    "is 580.65.06")
    assert "lspci -k" in todo
    assert nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 6, "No devices were found\n", "", None, "580")[1] is None


def test_no_blackwell_card_under_the_proprietary_kernel_module_says_to_install_the_open_one():
    # NVIDIA drives Blackwell cards only with its open kernel modules; the proprietary flavour loads
    # (its /proc line names no "Open") and nvidia-smi finds no device.
    assert smi.kernel_module_flavour(PROPRIETARY_MODULE) == "proprietary"
    assert smi.kernel_module_flavour(OPEN_MODULE) == "open" and smi.kernel_module_flavour("") is None
    what, todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 6, "No devices were found\n", "", "580.95.05",
                                              "580", "proprietary")
    assert what == ("nvidia-smi did not report a driver (exit 6: No devices were found); the loaded kernel driver is "
                    "580.95.05, NVIDIA's proprietary kernel module, which takes no Blackwell card (NVIDIA drives the "
                    "RTX PRO 6000 Blackwell only with its open kernel modules)")
    assert todo.startswith("Install the open kernel modules") and "nvidia-driver-580-open" in todo
    # Older as well: the open modules of a driver for CUDA 13.
    what, todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 6, "No devices were found\n", "", "570.86.15",
                                              "580", "proprietary")
    assert what.endswith("older than 580, the first driver for CUDA 13") and "nvidia-driver-580-open" in todo
    # The open flavour keeps the advice about the cards themselves.
    todo = nvidia_driver.driver_problem("/usr/bin/nvidia-smi", 6, "No devices were found\n", "", "580.95.05", "580",
                                        "open")[1]
    assert "lspci -k" in todo
