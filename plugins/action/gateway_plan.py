# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.gateway_plan: the gateway's servers from the boxes' published facts,
on the controller (module_utils/gateway.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import BOX_FACTS, backend_plan, box_from_facts
from ansible_collections.glm53.tensorfold.plugins.modules.gateway_plan import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("gateway_plan: %s" % "; ".join(checked.error_messages))
        args = checked.validated_parameters
        boxes = [box_from_facts(host, published(self._templar, task_vars or {}, host, BOX_FACTS), args["default_port"])
                 for host in args["hosts"]]
        result.update(backend_plan(boxes))
        result["changed"] = False
        return result
