# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters: a host as it goes into a URL (url_host), and where the box reaches its own API (api_host)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.glm53.tensorfold.plugins.module_utils.net import api_host, url_host


class FilterModule(object):
    """Hosts in URLs."""

    def filters(self):
        return {"url_host": url_host, "api_host": api_host}
