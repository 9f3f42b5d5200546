# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.host_plan: one host's dry-run plan, on the controller
(module_utils/plan.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.plan import plan_lines
from ansible_collections.glm53.tensorfold.plugins.modules import host_plan
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = host_plan.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        return {"lines": plan_lines(dict(args["settings"]), dict(args["known"]))}
