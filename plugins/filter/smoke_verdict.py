# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: the smoke test's verdict from the registered uri results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import verdict


def _smoke_verdict(results, host, endpoint, served_name, vision=False, api_key_set=False):
    if not isinstance(results, dict):
        raise AnsibleFilterError("smoke_verdict: the input must map request names to uri results")
    return verdict(dict(results), host, endpoint, served_name, bool(vision), bool(api_key_set))


class FilterModule(object):
    """Smoke test verdict."""

    def filters(self):
        return {"smoke_verdict": _smoke_verdict}
