# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: a host as it goes into a URL (the gateway's URL in the gateway and fleet_bench roles)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.glm53.tensorfold.plugins.module_utils.net import url_host


class FilterModule(object):
    """Hosts in URLs."""

    def filters(self):
        return {"url_host": url_host}
