# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.report_files: the run's report files written on the controller by the
action itself (no module run, no copy per file)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail

from ansible_collections.glm53.tensorfold.plugins.modules import report_files
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.report_files import write_files


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = report_files.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        try:
            return {"paths": write_files(args["folder"], args["files"], int(args["mode"], 8))}
        except (OSError, IOError, ValueError) as err:
            raise AnsibleActionFail("report_files: cannot write into %s: %s" % (args["folder"], err))
