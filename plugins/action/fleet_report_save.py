# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.fleet_report_save: the report's files written by the controller's own
process (a delegated copy would start a module per file)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail

from ansible_collections.glm53.tensorfold.plugins.module_utils.files import write_if_changed
from ansible_collections.glm53.tensorfold.plugins.modules import fleet_report_save
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction


def save(folder, files):
    """Write each ``{name, content}`` into ``folder`` unless it already holds that content; the paths written."""
    paths = [os.path.join(folder, item["name"]) for item in files]
    return [path for path, item in zip(paths, files) if write_if_changed(path, item["content"])]


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = fleet_report_save.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        try:
            return {"written": save(args["folder"], args["files"])}
        except (IOError, OSError) as error:
            raise AnsibleActionFail("fleet_report_save: %s" % error)
