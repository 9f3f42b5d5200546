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
    BOX_FACTS, backend_plan, box_from_facts, check_fall_problem, check_timing_problem, listen_clashes, name_clashes,
    shared_addresses)
from ansible_collections.glm53.tensorfold.plugins.modules import gateway_plan
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = gateway_plan.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        me = task_vars.get("inventory_hostname", "gateway")
        timing = args.get("check")
        if timing and check_fall_problem(timing["fall"]):
            raise AnsibleActionFail(problem("E_SETTINGS", me, check_fall_problem(timing["fall"]),
                                            "Set gateway_check_fall to 2 or more."))
        wrong = timing and check_timing_problem(timing["interval"], timing["timeout"], timing["fastinter_ms"], timing["fall"])
        if wrong:
            raise AnsibleActionFail(problem("E_SETTINGS", me, wrong, "Lower the timeout or raise the interval."))
        boxes = [box_from_facts(host, published(self._templar, task_vars, host, BOX_FACTS), args["default_port"])
                 for host in args["hosts"]]
        plan = backend_plan(boxes)
        # Refused before anything is written: HAProxy would refuse the whole configuration.
        clashes = name_clashes(plan)
        if clashes:
            raise AnsibleActionFail(problem("E_SETTINGS", me, "; ".join(clashes) + " (HAProxy refuses two servers "
                                            "of one name)", "Rename one of each pair in the inventory."))
        listens = listen_clashes(me, boxes, args.get("listens") or [], args.get("engine_bind") or "0.0.0.0")
        if listens:
            raise AnsibleActionFail(problem("E_SETTINGS", me, "; ".join(listens), "Set gateway_port (and "
                                            "gateway_stats_port) for this host to ports the engine does not use, "
                                            "or bind them to another address (gateway_bind)."))
        plan["warnings"] = [problem("W_GATEWAY", me, text, "Give each box its own address or port in the inventory, "
                                    "or keep one of them out of %s." % args.get("group", "gpu_hosts"))
                            for text in shared_addresses(plan)]
        return plan
