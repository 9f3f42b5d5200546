# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils import basic

from ansible_collections.glm53.tensorfold.plugins.modules import apt_madison_info

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "apt_madison")


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_the_pairs_come_from_apt_cache_madison_of_the_packages(monkeypatch, run_module):
    asked = []

    def run_command(self, argv, **kwargs):
        asked.append(argv)
        if argv[0].endswith("dpkg-query"):
            return 1, "nvidia-container-toolkit\thold\n", "dpkg-query: no packages found matching libnvidia-container1\n"
        return 0, recorded("nvidia_flat_repo.out"), ""

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    result = run_module(apt_madison_info, packages=["nvidia-container-toolkit", "libnvidia-container1"])
    assert asked[-1] == ["/usr/bin/apt-cache", "madison", "nvidia-container-toolkit", "libnvidia-container1"]
    assert asked[0][0] == "/usr/bin/dpkg-query" and asked[0][-2:] == ["nvidia-container-toolkit", "libnvidia-container1"]
    assert result["changed"] is False and result["rc"] == 0
    assert result["held"] == ["nvidia-container-toolkit"]
    assert result["pairs"] and all("=" in pair for pair in result["pairs"])
    assert result["pairs"][0].startswith("nvidia-container-toolkit=")


def test_an_unknown_package_gives_no_pairs_and_no_failure(monkeypatch, run_module):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: (0, recorded("unknown_package.out"), ""))
    result = run_module(apt_madison_info, packages=["nvidia-container-toolkit"])
    assert result["pairs"] == [] and not result.get("failed")


def test_a_host_without_apt_cache_gives_no_pairs(monkeypatch, run_module):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: None)
    result = run_module(apt_madison_info, packages=["nvidia-container-toolkit"])
    assert result["pairs"] == [] and result["rc"] is None and result["held"] == [] and not result.get("failed")


def test_apt_unable_to_read_its_sources_fails_with_its_message_not_an_empty_answer(monkeypatch, run_module):
    err = ("E: Conflicting values set for option Signed-By regarding source https://nvidia.github.io/libnvidia-container/"
           "stable/deb/amd64/ /: /etc/apt/keyrings/nvidia-container-toolkit.asc != /usr/share/keyrings/x.gpg\n"
           "E: The list of sources could not be read.\n")

    def run_command(self, argv, **kwargs):
        if argv[0].endswith("dpkg-query"):
            return 0, "nvidia-container-toolkit\thold\n", ""
        return 100, "", err

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: "/usr/bin/" + name)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    result = run_module(apt_madison_info, packages=["nvidia-container-toolkit"])
    assert result["failed"] and result["rc"] == 100 and result["stderr"] == err
    assert result["msg"].startswith("apt-cache madison exited 100: E: Conflicting values set for option Signed-By")
    assert result["pairs"] == [] and result["held"] == ["nvidia-container-toolkit"]
