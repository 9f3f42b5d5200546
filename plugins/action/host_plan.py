# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.host_plan: one host's dry-run plan, on the controller
(module_utils/plan.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils.plan import plan_lines
from ansible_collections.glm53.tensorfold.plugins.modules.host_plan import ARGUMENT_SPEC


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("host_plan: %s" % "; ".join(checked.error_messages))
        lines = plan_lines(dict(checked.validated_parameters["settings"]), dict(checked.validated_parameters["known"]))
        result.update(changed=False, lines=lines)
        return result
