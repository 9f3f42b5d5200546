# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.gpu_host_verdict: judge a host's observations, or sum up the fleet's
verdicts, on the controller (module_utils/host_checks.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.glm53.tensorfold.plugins.module_utils import host_checks
from ansible_collections.glm53.tensorfold.plugins.modules import gpu_host_verdict
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = gpu_host_verdict.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        if args["fleet"] is not None:
            verdicts = []
            for host in args["fleet"]:
                verdict = published(self._templar, task_vars, host, ["gpu_host_checks_result"]).get("gpu_host_checks_result")
                verdicts.append((host, verdict if isinstance(verdict, dict) else None))
            return {"fleet": host_checks.fleet_summary(verdicts)}
        if args["resources"] is None or args["gpu_info"] is None:
            raise AnsibleActionFail("gpu_host_verdict: resources and gpu_info are required to judge a host")
        expect = args["expect"]
        observed = host_checks.observe(args["resources"], args["gpu_info"])
        problems = host_checks.host_problems(task_vars.get("inventory_hostname", "host"), observed, expect)
        gpus = host_checks.select(observed["gpu_info"].get("gpus") or [], expect.get("gpu_indices", [0, 1]))[0]
        return {"status": host_checks.status(problems), "problems": problems, "gpus": gpus}
