# -*- coding: utf-8 -*-
"""image_identity: what the role compares between hosts is what peer_image_load checks on the host;
anything but one image's inspection is refused."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.glm53.tensorfold.plugins.filter.image_identity import FilterModule
from ansible_collections.glm53.tensorfold.tests.unit.plugins.module_utils.test_peer_image_load import (
    IDENTITY, IMAGE, IMAGE_CONTAINERD)

IMAGE_IDENTITY = FilterModule().filters()["image_identity"]


def test_one_image_in_either_store_has_the_identity_the_load_checks():
    assert IMAGE_IDENTITY(IMAGE) == IMAGE_IDENTITY(IMAGE_CONTAINERD) == IDENTITY
    assert IMAGE["Id"] != IMAGE_CONTAINERD["Id"]


@pytest.mark.parametrize("wrong", [[IMAGE], {"images": [IMAGE]}, {}, None, "sha256:" + "5b" * 32])
def test_anything_but_one_inspection_is_refused(wrong):
    with pytest.raises(AnsibleFilterError, match="one image's inspection"):
        IMAGE_IDENTITY(wrong)
