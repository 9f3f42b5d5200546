# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: what other hosts of the play published, for actions that judge the fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError


# What the fast path registers on every host of pre-flight (step/tasks/converged.yml): each GPU
# box's answer under "boxes"; a converged box's "published" holds the facts its skipped steps
# would have set.
CONVERGED = "step_converged_info"


def published(templar, task_vars, host, names):
    """The variables ``names`` that ``host`` has (its facts, registered results, inventory), as
    values; a name the host does not have, or an unknown host, is left out. A box the fast path
    found converged stands for the facts of the steps it skipped (converged_info's ``published``),
    unless a step of this run set them itself.

    The host's variables are computed once (``hostvars[host]``), each name templated apart: a
    report over a fleet would otherwise compute each host's variables again for every name, and one
    variable that does not template must not hide the others."""
    hostvars = task_vars.get("hostvars") or {}
    try:
        if host not in hostvars:
            return {}
        host_vars = hostvars[host]
    except (AnsibleError, KeyError, TypeError):
        return {}
    resolve = getattr(templar, "resolve_variable_expression", None)

    def read(name):
        if resolve is None:  # ansible-core before 2.19: values come raw
            return templar.template(host_vars[name])
        return resolve("host_vars[name]", local_variables={"host_vars": host_vars, "name": name})

    def own_answer():
        # Only the box's own entry: the whole registered value (every box's answer) on each of N
        # hosts would cost a report N * N answers.
        if resolve is None:
            fleet = templar.template(host_vars[CONVERGED]) or {}
            return ((fleet.get("boxes") or {}).get(host) or {}).get("published")
        return (resolve("host_vars[name].boxes[host]",
                        local_variables={"host_vars": host_vars, "name": CONVERGED, "host": host}) or {}).get("published")

    found, stands_for, facts = {}, None, None
    for name in names:
        try:
            if name in host_vars:
                found[name] = read(name)
                continue
            # A module's fact (gpu_host_checks_gpus) is a variable of its own only while
            # inject_facts_as_vars holds (ansible.cfg); under ansible_facts it is there either way.
            if facts is None:
                facts = {}  # a failed read of the facts leaves the box's stand-in below to answer
                facts = (read("ansible_facts") if "ansible_facts" in host_vars else None) or {}
            if name in facts:
                found[name] = facts[name]
                continue
        except (AnsibleError, KeyError, TypeError):
            if name in host_vars:
                continue
        if stands_for is None:
            try:
                stands_for = (own_answer() if CONVERGED in host_vars else None) or {}
            except (AnsibleError, KeyError, AttributeError):
                stands_for = {}
        if name in stands_for:
            found[name] = stands_for[name]
    return found
