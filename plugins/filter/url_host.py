# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters: a host as it goes into a URL (url_host), where the box reaches its own API (api_host), and
the URL clients use for it (public_endpoint)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.glm53.tensorfold.plugins.module_utils.net import api_host, public_endpoint, url_host


class FilterModule(object):
    """Hosts in URLs."""

    def filters(self):
        return {"url_host": url_host, "api_host": api_host, "public_endpoint": public_endpoint}
