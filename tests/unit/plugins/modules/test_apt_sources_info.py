# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.modules import apt_sources_info

NVIDIA = "deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
ROLE_SOURCE = "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64\nSuites: /\nSigned-By: /etc/apt/keyrings/n.asc\n"


def test_other_files_naming_the_repository_are_listed_and_the_excluded_and_ignored_ones_not(tmp_path, run_module):
    main = tmp_path / "sources.list"
    main.write_text("deb http://deb.debian.org/debian bookworm main\n" + NVIDIA)
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "nvidia.list").write_text(NVIDIA)
    (parts / "nvidia.list.save").write_text(NVIDIA)  # apt does not read it
    (parts / "nvidia-container-toolkit.sources").write_text(ROLE_SOURCE)
    (parts / "nvidia-container-toolkit.list").write_text(NVIDIA)
    (parts / "debian.sources").write_text("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n")
    result = run_module(apt_sources_info, uri="https://nvidia.github.io/libnvidia-container/stable/deb/amd64", arch="amd64",
                        sources_list=str(main), sources_dir=str(parts),
                        exclude=[str(parts / "nvidia-container-toolkit.sources"), str(parts / "nvidia-container-toolkit.list")])
    assert result["changed"] is False and not result.get("failed")
    assert result["found"] == [
        {"path": str(main), "lines": [2], "shown": str(main) + " (line 2)"},
        {"path": str(parts / "nvidia.list"), "lines": [1], "shown": str(parts / "nvidia.list") + " (line 1)"},
    ]


def test_a_host_without_those_files_has_nothing_found(tmp_path, run_module):
    result = run_module(apt_sources_info, uri="https://x/deb/amd64", sources_list=str(tmp_path / "none"),
                        sources_dir=str(tmp_path / "none.d"))
    assert result["found"] == [] and not result.get("failed")


def test_the_same_look_says_which_of_the_given_paths_exist(tmp_path, run_module):
    legacy = tmp_path / "nvidia-docker.list"
    legacy.write_text("deb https://nvidia.github.io/nvidia-docker/debian11/$(ARCH) /\n")
    linked = tmp_path / "nvidia-docker.gpg"
    linked.symlink_to(tmp_path / "gone.gpg")  # a dangling link is still a file to remove
    asked = [str(tmp_path / "missing.list"), str(linked), str(legacy), str(tmp_path / "keyring.gpg")]
    result = run_module(apt_sources_info, uri="https://x/deb/amd64", sources_list=str(tmp_path / "none"),
                        sources_dir=str(tmp_path / "none.d"), present=asked)
    assert result["present"] == [str(linked), str(legacy)] and result["found"] == []
