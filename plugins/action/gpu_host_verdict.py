# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.gpu_host_verdict: read a host with host_resources and judge it, in one
task; or judge observations given; or sum up the fleet's verdicts (module_utils/host_checks.py
holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.glm53.tensorfold.plugins.module_utils import host_checks, host_resources
from ansible_collections.glm53.tensorfold.plugins.modules import gpu_host_verdict
from ansible_collections.glm53.tensorfold.plugins.modules.host_resources import ARGUMENT_SPEC as READER_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils import box_reader
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published

READER = "glm53.tensorfold.host_resources"


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = gpu_host_verdict.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        if args["fleet"] is not None:
            verdicts = []
            for host in args["fleet"]:
                verdict = published(self._templar, task_vars, host, ["gpu_host_checks_result"]).get("gpu_host_checks_result")
                verdicts.append((host, host_checks.judged(verdict)))
            return {"fleet": host_checks.fleet_summary(verdicts)}
        resources, gpu_info = args["resources"], args["gpu_info"]
        if args["host_resources"] is not None:
            # host_resources on the host itself (it only reads: the same answer in check mode), with
            # the host's own Python where the connection pipelines and that Python is the one the
            # modules use (it reports whether that one imports requests); a remote temporary folder,
            # when the module needed one, goes with ActionBase.cleanup.
            resources = box_reader.read_or_run(self, task_vars, READER, READER_SPEC, args["host_resources"],
                                               host_resources.READER_MODULES, "on_box", any_python=False)
            if resources.get("failed") or resources.get("unreachable"):
                # Not judged: the step guard records this failure, the fleet summary counts no result.
                return dict((key, value) for key, value in resources.items() if key != "changed")
            gpu_info = resources.get("gpu_info")
        if resources is None or gpu_info is None:
            raise AnsibleActionFail("gpu_host_verdict: host_resources (with gpus), or resources and gpu_info, "
                                    "are required to judge a host")
        verdict = host_checks.verdict(task_vars.get("inventory_hostname", "host"), resources, gpu_info, args["expect"],
                                      args["toolkit_follows"])
        # The checked GPUs are a fact of the host; the verdict is only this run's (registered, never cached).
        verdict["ansible_facts"] = {"gpu_host_checks_gpus": verdict["gpus"]}
        verdict.update(host_checks.shown(verdict, args["fail"]))
        if resources.get("read_with"):
            verdict["read_with"] = resources["read_with"]  # how host_resources read the host
        return verdict
