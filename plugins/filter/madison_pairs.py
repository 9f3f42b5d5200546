# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The madison_pairs filter: apt-cache madison output as NAME=VERSION strings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.apt_madison import madison_pairs


class FilterModule(object):
    """apt-cache madison parsing."""

    def filters(self):
        return {"madison_pairs": madison_pairs}
