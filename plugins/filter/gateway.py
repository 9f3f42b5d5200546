# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters: the gateway's servers from the fleet's hostvars, and a box's server name."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import backend_plan, server_name


def _gateway_backends(hostvars, hosts, default_port=8020):
    """Pick each box's address, port, failure and smoke verdict out of hostvars and plan the
    gateway's servers (module_utils.gateway.backend_plan)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("gateway_backends: hosts must be a list of inventory host names")
    boxes = []
    for host in hosts:
        try:
            facts = hostvars[host]
        except KeyError:
            facts = {}
        failure = facts.get("fleet_report_failure") or {}
        smoke = facts.get("smoke_test_result") or {}
        boxes.append({
            "host": host,
            "address": facts.get("ansible_host") or host,
            "port": facts.get("tensorfold_port") or default_port,
            "failure_stage": failure.get("stage") if isinstance(failure, dict) else None,
            "smoke_status": smoke.get("status") if isinstance(smoke, dict) else None,
        })
    return backend_plan(boxes)


class FilterModule(object):
    """Gateway."""

    def filters(self):
        return {
            "gateway_backends": _gateway_backends,
            "gateway_server_name": server_name,
        }
