# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: a box's server name at the gateway (HAProxy's rules for names)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import server_name


class FilterModule(object):
    """Gateway."""

    def filters(self):
        return {
            "gateway_server_name": server_name,
        }
