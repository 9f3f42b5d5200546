# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: the smoke test's request list, printed instead of sent in check mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.plan import smoke_requests


def _smoke_requests(url, served_name, vision=True, api_key_set=False, max_tokens=32):
    return smoke_requests(url, served_name, bool(vision), bool(api_key_set), max_tokens)


class FilterModule(object):
    """Smoke test plan."""

    def filters(self):
        return {"smoke_requests": _smoke_requests}
