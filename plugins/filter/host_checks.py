# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters the gpu_host_checks role uses to judge a host and to write the fleet summary."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.host_checks import (
    fleet_summary,
    host_problems,
    status,
)


def _gpu_host_problems(observed, host, expect):
    return host_problems(host, observed, expect)


def _gpu_host_status(problems):
    return status(problems)


class FilterModule(object):
    """Host check judgements."""

    def filters(self):
        return {
            "gpu_host_problems": _gpu_host_problems,
            "gpu_host_status": _gpu_host_status,
            "gpu_host_fleet_summary": fleet_summary,
        }
