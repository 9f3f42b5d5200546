# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: an image's identity across Docker's image stores (image_load.identity), so the role that
moves an image between hosts and the module that loads it compare the same thing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.glm53.tensorfold.plugins.module_utils.image_load import identity


def image_identity(inspect):
    if not isinstance(inspect, dict) or not inspect.get("Id"):
        raise AnsibleFilterError("image_identity takes one image's inspection (docker_image_info's images[0]), got %s"
                                 % type(inspect).__name__)
    return identity(inspect)


class FilterModule(object):
    """Images across hosts."""

    def filters(self):
        return {"image_identity": image_identity}
