# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters: the fleet report built from hostvars (its Markdown is roles/fleet_report's template)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleFilterError

from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import (
    FACTS, build_report)


def _fleet_report(hostvars, hosts, generated_at="", plan=False, slow_ratio=0.85):
    """Pick the public facts of each host out of hostvars and build the report."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("fleet_report: hosts must be a list of inventory host names")
    picked = {}
    for host in hosts:
        try:
            facts = hostvars[host]
        except KeyError:
            facts = {}
        picked[host] = dict((name, facts[name]) for name in FACTS if name in facts)
    return build_report(picked, generated_at=generated_at, plan=plan, slow_ratio=float(slow_ratio))


def _from_cwd(path):
    """A relative path taken from the directory ansible-playbook was started in.

    Lookups such as pipe run in the playbook's folder, which for an installed collection is
    inside the collection; the controller's own working directory is the operator's.
    """
    path = os.path.expanduser(str(path))
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))


class FilterModule(object):
    """Fleet report."""

    def filters(self):
        return {
            "fleet_report": _fleet_report,
            "from_cwd": _from_cwd,
        }
