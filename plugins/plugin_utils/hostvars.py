# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: what other hosts of the play published, for actions that judge the fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError


def published(templar, task_vars, host, names):
    """The variables ``names`` that ``host`` has (its facts, registered results, inventory), as
    values; a name the host does not have, or an unknown host, is left out."""
    resolve = getattr(templar, "resolve_variable_expression", None)
    found = {}
    for name in names:
        try:
            if resolve is None:  # ansible-core before 2.19
                facts = task_vars["hostvars"][host]
                if name in facts:
                    found[name] = templar.template(facts[name])
                continue
            found[name] = resolve("hostvars[host][name]", local_variables={"host": host, "name": name})
        except (AnsibleError, KeyError):
            continue
    return found
