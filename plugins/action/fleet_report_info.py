# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.fleet_report_info: the fleet report from the hosts' published facts,
on the controller (module_utils/fleet_report.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import FACTS, build_report
from ansible_collections.glm53.tensorfold.plugins.modules.fleet_report_info import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("fleet_report_info: %s" % "; ".join(checked.error_messages))
        args = checked.validated_parameters
        facts = dict((host, published(self._templar, task_vars or {}, host, FACTS)) for host in args["hosts"])
        generated_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        result.update(changed=False, report=build_report(facts, generated_at=generated_at, plan=args["plan"],
                                                         slow_ratio=args["slow_ratio"]))
        return result
