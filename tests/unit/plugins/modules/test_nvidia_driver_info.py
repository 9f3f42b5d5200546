# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils import basic

from ansible_collections.glm53.tensorfold.plugins.modules import nvidia_driver_info

PROC = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)\n"


def test_placeholder_lines_are_reported_not_compared(monkeypatch, run_module, tmp_path):
    monkeypatch.setattr(nvidia_driver_info, "PROC_VERSION", str(tmp_path / "absent"))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (0, "[N/A]\n[GPU requires reset]\n", ""))
    result = run_module(nvidia_driver_info, min_version="580")
    assert not result.get("failed") and result["versions"] == [] and result["kernel_module"] is None
    assert result["problem"] == "nvidia-smi did not report a driver (exit 0: [N/A] [GPU requires reset])"


def test_a_good_driver_has_no_problem(monkeypatch, run_module, tmp_path):
    proc = tmp_path / "version"
    proc.write_text(PROC)
    monkeypatch.setattr(nvidia_driver_info, "PROC_VERSION", str(proc))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (0, "580.95.05\n580.95.05\n", ""))
    result = run_module(nvidia_driver_info)
    assert result["problem"] is None and result["versions"] == ["580.95.05"] and result["kernel_module"] == "580.95.05"
    assert result["nvidia_smi"] == "/usr/bin/nvidia-smi" and result["nvidia_smi_rc"] == 0


def test_a_loaded_driver_without_nvidia_smi_is_not_called_no_driver(monkeypatch, run_module, tmp_path):
    proc = tmp_path / "version"
    proc.write_text(PROC)
    monkeypatch.setattr(nvidia_driver_info, "PROC_VERSION", str(proc))
    monkeypatch.setattr(nvidia_driver_info, "EXTRA_DIRS", [])
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: None)
    result = run_module(nvidia_driver_info)
    assert result["problem"].startswith("nvidia-smi is not installed (not on PATH) while the NVIDIA kernel driver 580.95.05")
    assert "nvidia-utils-580" in result["todo"] and result["nvidia_smi"] is None and result["nvidia_smi_rc"] is None


def test_an_nvidia_smi_that_is_not_executable_is_named(monkeypatch, run_module, tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o644)
    monkeypatch.setattr(nvidia_driver_info, "PROC_VERSION", str(tmp_path / "absent"))
    monkeypatch.setattr(nvidia_driver_info, "EXTRA_DIRS", [])
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: None)
    result = run_module(nvidia_driver_info)
    assert result["problem"] == ("nvidia-smi cannot run (%s is not executable), and no NVIDIA kernel module is loaded "
                                 "(no /proc/driver/nvidia/version)" % smi)


def test_a_failing_nvidia_smi_is_a_problem_not_a_failed_task(monkeypatch, run_module, tmp_path):
    # Ansible fails any module result whose "rc" is not 0: the exit status goes by another name.
    monkeypatch.setattr(nvidia_driver_info, "PROC_VERSION", str(tmp_path / "absent"))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (
        9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", ""))
    result = run_module(nvidia_driver_info)
    assert "rc" not in result and result["nvidia_smi_rc"] == 9 and not result.get("failed")
    assert result["problem"].startswith("nvidia-smi did not report a driver (exit 9: NVIDIA-SMI has failed")


def test_no_blackwell_card_under_the_proprietary_kernel_module_names_the_flavour(monkeypatch, run_module, tmp_path):
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 18:55:19 UTC 2025\n")
    monkeypatch.setattr(nvidia_driver_info, "PROC_VERSION", str(proc))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (6, "No devices were found\n", ""))
    result = run_module(nvidia_driver_info)
    assert result["kernel_module"] == "580.95.05" and result["kernel_module_flavour"] == "proprietary"
    assert "proprietary kernel module, which takes no Blackwell card" in result["problem"]
    assert result["todo"].startswith("Install the open kernel modules")
