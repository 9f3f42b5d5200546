# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.apt_madison import madison_pairs

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "apt_madison", "nvidia_flat_repo.out")


def read():
    with open(FIXTURE) as handle:
        return handle.read()


def test_every_binary_version_is_listed_once_in_apt_order():
    pairs = madison_pairs(read())
    assert pairs[:2] == ["nvidia-container-toolkit=1.18.2-1", "nvidia-container-toolkit=1.18.1-1"]
    assert "libnvidia-container1=1.18.1-1" in pairs
    assert pairs.count("docker.io=20.10.24+dfsg1-1+deb12u1") == 1
    assert len(pairs) == 9


def test_lines_and_text_give_the_same_pairs():
    assert madison_pairs(read().splitlines()) == madison_pairs(read())


def test_unknown_packages_and_noise_give_nothing():
    assert madison_pairs(["N: Unable to locate package nvidia-container-toolkit", ""]) == []
