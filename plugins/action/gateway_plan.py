# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.gateway_plan: the gateway's servers from the boxes' published facts,
on the controller (module_utils/gateway.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import (
    BOX_FACTS, backend_plan, box_from_facts, check_timing_problem)
from ansible_collections.glm53.tensorfold.plugins.modules import gateway_plan
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = gateway_plan.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        timing = args.get("check")
        wrong = timing and check_timing_problem(timing["interval"], timing["timeout"], timing["fastinter_ms"], timing["fall"])
        if wrong:
            raise AnsibleActionFail(problem("E_SETTINGS", task_vars.get("inventory_hostname", "gateway"), wrong,
                                            "Lower the timeout or raise the interval."))
        return backend_plan([box_from_facts(host, published(self._templar, task_vars, host, BOX_FACTS), args["default_port"])
                             for host in args["hosts"]])
