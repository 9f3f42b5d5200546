# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils import apt_madison
from ansible_collections.glm53.tensorfold.plugins.module_utils.apt_madison import madison_pairs

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "apt_madison")


def read(name="nvidia_flat_repo.out"):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_every_version_of_the_four_packages_is_listed_in_apt_order():
    pairs = madison_pairs(read())
    assert pairs[:2] == ["nvidia-container-toolkit=1.18.2-1", "nvidia-container-toolkit=1.18.1-1"]
    for name in ("nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"):
        assert name + "=1.18.1-1" in pairs and name + "=1.18.2-1" in pairs
    assert len(pairs) == 8


def test_the_pinned_set_is_found_and_a_wrong_pin_is_not():
    pairs = madison_pairs(read())
    wanted = ["nvidia-container-toolkit=1.18.1-1", "libnvidia-container1=1.18.1-1"]
    assert [pair for pair in wanted if pair not in pairs] == []
    assert "nvidia-container-toolkit=9.9.9-1" not in pairs


def test_source_lines_and_duplicates_are_skipped():
    # madison's format for a deb-src origin and a version offered by two origins (sources.list(5))
    lines = [" docker.io | 20.10.24+dfsg1-1+deb12u1 | http://deb.debian.org/debian bookworm/main amd64 Packages",
             " docker.io | 20.10.24+dfsg1-1+deb12u1 | http://mirror.internal/debian bookworm/main amd64 Packages",
             " docker.io | 20.10.24+dfsg1-1+deb12u1 | http://deb.debian.org/debian bookworm/main Sources"]
    assert madison_pairs(lines) == ["docker.io=20.10.24+dfsg1-1+deb12u1"]


def test_lines_and_text_give_the_same_pairs():
    assert madison_pairs(read().splitlines()) == madison_pairs(read())


def test_unknown_package_gives_nothing():
    assert madison_pairs(read("unknown_package.out")) == []
    assert madison_pairs(["N: Unable to locate package nvidia-container-toolkit", ""]) == []


def test_held_packages_are_named_in_the_order_asked_whatever_their_architecture_suffix():
    out = ("libnvidia-container1:amd64\thold\nnvidia-container-toolkit\tinstall\n"
           "nvidia-container-toolkit-base\thold\nlibnvidia-container-tools\tdeinstall\n")
    asked = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"]
    assert apt_madison.held_packages(out, asked) == ["nvidia-container-toolkit-base", "libnvidia-container1"]
    assert apt_madison.held_packages("", asked) == []
    assert apt_madison.held_packages("dpkg-query: no packages found matching x\n", ["x"]) == []


# apt 2.6's answer when two sources of one repository name different keys (recorded with a scratch
# Dir::Etc): exit 100, nothing on stdout, each error twice on stderr.
CONFLICT_STDERR = (
    "E: Conflicting values set for option Signed-By regarding source "
    "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/ /: /etc/apt/keyrings/nvidia-container-toolkit.asc "
    "!= /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg\n"
    "E: The list of sources could not be read.\n"
    "E: Conflicting values set for option Signed-By regarding source "
    "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/ /: /etc/apt/keyrings/nvidia-container-toolkit.asc "
    "!= /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg\n"
    "E: The list of sources could not be read.\n")


def test_a_failed_madison_is_an_error_that_quotes_apt_each_line_once():
    error = apt_madison.madison_error(100, CONFLICT_STDERR)
    assert error.startswith("apt-cache madison exited 100: E: Conflicting values set for option Signed-By")
    assert error.count("Conflicting values") == 1 and error.endswith("E: The list of sources could not be read.")
    assert apt_madison.madison_error(100, "") == "apt-cache madison exited 100: it printed no message"


def test_an_unknown_package_is_an_answer_not_an_error():
    # apt 2.6: `apt-cache madison nosuchpkg` exits 0 and prints nothing.
    assert apt_madison.madison_error(0, "") is None
    assert apt_madison.madison_error(0, "W: Target Packages is configured multiple times\n") is None
