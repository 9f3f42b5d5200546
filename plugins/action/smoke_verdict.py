# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.smoke_verdict: the smoke test's verdict from the registered answers,
on the controller (module_utils/smoke.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import verdict
from ansible_collections.glm53.tensorfold.plugins.modules.smoke_verdict import ARGUMENT_SPEC


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("smoke_verdict: %s" % "; ".join(checked.error_messages))
        args = checked.validated_parameters
        host = (task_vars or {}).get("inventory_hostname", "host")
        judged = verdict(dict(args["answers"]), host, args["url"], args["served_name"], args["vision"], args["api_key_set"])
        judged["endpoint"] = args["endpoint"] if args["endpoint"] is not None else args["url"]
        result.update(changed=False, verdict=judged)
        return result
