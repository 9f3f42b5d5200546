# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters: the dry-run plan of one host and the smoke test's request list."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.plan import plan_lines, smoke_requests


def _fleet_plan(settings, facts=None):
    return plan_lines(dict(settings or {}), dict(facts or {}))


def _smoke_requests(url, served_name, vision=True, api_key_set=False, max_tokens=32):
    return smoke_requests(url, served_name, bool(vision), bool(api_key_set), max_tokens)


class FilterModule(object):
    """Dry-run plan."""

    def filters(self):
        return {"fleet_plan": _fleet_plan, "smoke_requests": _smoke_requests}
