# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Which source entries apt counts as NVIDIA's repository. Each case that names it was checked
against apt 2.6 (a scratch Dir::Etc with the role's .sources file and the entry beside it): apt
failed with "Conflicting values set for option Signed-By"; each case that does not, it accepted."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import apt_sources

REPO = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64"
KEYRING_GPG = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"


@pytest.mark.parametrize("line", [
    # NVIDIA's install guide, word for word
    "deb [signed-by=%s] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /" % KEYRING_GPG,
    "deb https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /",
    "deb [arch=amd64 signed-by=/x.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/amd64/ /",
    "deb-src [signed-by=/x.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /",
    "deb [signed-by=/x.gpg] http://nvidia.github.io/libnvidia-container/stable/deb/amd64 /",  # apt ignores the scheme
    "deb [signed-by=/x.gpg] mirror+https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /",
    "\tdeb\t[ signed-by=/x.gpg ]\thttps://nvidia.github.io/libnvidia-container/stable/deb/amd64 / # NVIDIA",
])
def test_a_one_line_entry_of_the_repository_is_found(line):
    text = "deb http://deb.debian.org/debian bookworm main\n" + line + "\n"
    assert apt_sources.entries_naming(text, False, REPO, "amd64") == [2]


@pytest.mark.parametrize("line", [
    "# deb [signed-by=/x.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /",
    "deb [signed-by=/x.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/arm64 /",
    "deb [signed-by=/x.gpg] https://nvidia.github.io/libnvidia-container/experimental/deb/amd64 /",
    "deb http://deb.debian.org/debian bookworm main contrib",
])
def test_other_and_commented_entries_are_not(line):
    assert apt_sources.entries_naming(line + "\n", False, REPO, "amd64") == []


def test_arch_is_resolved_for_the_hosts_architecture_only():
    line = "deb https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n"
    assert apt_sources.entries_naming(line, False, REPO.replace("amd64", "arm64"), "arm64") == [1]
    assert apt_sources.entries_naming(line, False, REPO, "arm64") == []


def test_deb822_stanzas_with_the_repository_among_their_uris_are_found_unless_disabled():
    text = ("# Debian\n"
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\n"
            "\n"
            "Types: deb deb-src\n"
            "URIs: http://deb.debian.org/debian\n"
            "  https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)/\n"
            "Suites: /\nSigned-By: /x.gpg\n"
            "\n"
            "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64\nSuites: /\n"
            "Enabled: no\n")
    assert apt_sources.entries_naming(text, True, REPO, "amd64") == [7]  # the stanza's first line


def test_a_file_repository_matches_however_many_slashes_follow_file():
    # the bundle's repository on the host
    assert apt_sources.entries_naming("deb [trusted=yes] file:/opt/bundle/toolkit/deb/amd64 /\n", False,
                                      "file:///opt/bundle/toolkit/deb/amd64", "amd64") == [1]


def test_the_place_is_shown_as_file_and_lines():
    assert apt_sources.shown("/etc/apt/sources.list", [3]) == "/etc/apt/sources.list (line 3)"
    assert apt_sources.shown("/etc/apt/sources.list", [3, 7]) == "/etc/apt/sources.list (lines 3, 7)"
