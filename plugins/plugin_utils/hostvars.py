# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: what other hosts of the play published, for actions that judge the fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError


# What the fast path registers on each GPU box (rank_container/tasks/converged.yml): on a converged
# box, its "published" answer holds the facts the box's skipped steps would have set.
CONVERGED = "rank_container_converged_info"


def _host_vars(templar, task_vars, host):
    """One host's variables, read once: each ``hostvars[host]`` computes all of the host's
    variables again, which for a report over a fleet is most of its time."""
    resolve = getattr(templar, "resolve_variable_expression", None)
    if resolve is None:  # ansible-core before 2.19: values come raw, templated on reading
        facts = task_vars["hostvars"][host]
        return dict((name, _Raw(templar, facts, name)) for name in facts)
    return resolve("hostvars[host]", local_variables={"host": host})


class _Raw(object):
    """A value of an older ansible-core's hostvars, templated when read."""

    def __init__(self, templar, facts, name):
        self.templar, self.facts, self.name = templar, facts, name

    def value(self):
        return self.templar.template(self.facts[self.name])


def _value(found):
    return found.value() if isinstance(found, _Raw) else found


def published(templar, task_vars, host, names):
    """The variables ``names`` that ``host`` has (its facts, registered results, inventory), as
    values; a name the host does not have, or an unknown host, is left out. A box the fast path
    found converged stands for the facts of the steps it skipped (converged_info's ``published``),
    unless a step of this run set them itself."""
    try:
        host_vars = _host_vars(templar, task_vars, host)
    except (AnsibleError, KeyError):
        return {}
    found, stands_for = {}, None
    for name in names:
        try:
            if name in host_vars:
                found[name] = _value(host_vars[name])
                continue
        except (AnsibleError, KeyError):
            continue
        if stands_for is None:
            try:
                stands_for = ((_value(host_vars[CONVERGED]) if CONVERGED in host_vars else None) or {}).get("published") or {}
            except (AnsibleError, KeyError, AttributeError):
                stands_for = {}
        if name in stands_for:
            found[name] = stands_for[name]
    return found
