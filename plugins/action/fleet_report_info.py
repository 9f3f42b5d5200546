# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.fleet_report_info: the fleet report from the hosts' published facts,
on the controller (module_utils/fleet_report.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.glm53.tensorfold.plugins.module_utils import fleet_bench
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import FACTS, build_report
from ansible_collections.glm53.tensorfold.plugins.modules import fleet_report_info
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = fleet_report_info.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        facts = dict((host, published(self._templar, task_vars, host, FACTS)) for host in args["hosts"])
        # Ansible leaves the hosts it found unreachable out of later plays' hosts: no per-host task
        # has to mark the others.
        reached = args["reached_end"] if args["reached_end"] is not None else task_vars.get("ansible_play_hosts", [])
        for host in facts:
            facts[host]["fleet_report_reached_end"] = host in reached
        generated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        answer = {"report": build_report(facts, generated_at=generated_at, plan=args["plan"], slow_ratio=args["slow_ratio"])}
        if args["baselines"]:
            answer.update(self._baselines(args, facts, generated_at))
        return answer

    @staticmethod
    def _baselines(args, facts, measured_at):
        """The baselines record after this run; one that cannot be read is left as it is (a warning)."""
        path = args["baselines"]
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError):
            text = None  # no record yet
        try:
            previous = fleet_bench.parse_baselines(text)
        except ValueError as err:
            what = "the bench baselines %s are %s; left as they are, so this run keeps no bench figures" % (path, err)
            return {"baselines_changed": False, "warnings": [problem("W_BASELINES", "controller", what)]}
        results = {} if args["plan"] else dict((host, f.get("fleet_bench_result")) for host, f in facts.items())
        updated = fleet_bench.update_baselines(previous, results, measured_at)
        return {"baselines": updated, "baselines_changed": updated != previous}
