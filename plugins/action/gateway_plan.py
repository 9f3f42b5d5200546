# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.gateway_plan: the gateway's servers from the boxes' published facts,
on the controller (module_utils/gateway.py holds the rules). What would make HAProxy refuse the
configuration was refused in pre-flight (gateway.settings_problems, run by settings_check)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import (
    BOX_FACTS, backend_plan, box_from_facts, shared_addresses)
from ansible_collections.glm53.tensorfold.plugins.modules import gateway_plan
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = gateway_plan.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        me = task_vars.get("inventory_hostname", "gateway")
        boxes = [box_from_facts(host, published(self._templar, task_vars, host, BOX_FACTS), args["default_port"])
                 for host in args["hosts"]]
        plan = backend_plan(boxes)
        plan["warnings"] = [problem("W_GATEWAY", me, text, "Give each box its own address or port in the inventory, "
                                    "or keep one of them out of %s." % args.get("group", "gpu_hosts"))
                            for text in shared_addresses(plan)]
        return plan
