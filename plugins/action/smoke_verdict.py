# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.smoke_verdict: the smoke test's verdict from the registered answers,
on the controller (module_utils/smoke.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import verdict
from ansible_collections.glm53.tensorfold.plugins.modules import smoke_verdict
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = smoke_verdict.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        judged = verdict(dict(args["answers"]), task_vars.get("inventory_hostname", "host"), args["url"],
                         args["served_name"], args["vision"], args["api_key_set"])
        judged["endpoint"] = args["endpoint"] if args["endpoint"] is not None else args["url"]
        return {"verdict": judged}
