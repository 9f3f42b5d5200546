# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.fleet_report_save: the report's files written by the controller's own
process (a delegated copy would start a module per file)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleActionFail

from ansible_collections.glm53.tensorfold.plugins.modules import fleet_report_save
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction


def save(folder, files):
    """Write each ``{name, content}`` into ``folder`` unless it already holds that content; the paths written."""
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    written = []
    for item in files:
        path = os.path.join(folder, item["name"])
        try:
            with open(path) as handle:
                if handle.read() == item["content"]:
                    continue
        except (IOError, OSError):
            pass
        with open(path + ".tmp", "w") as handle:
            handle.write(item["content"])
        os.chmod(path + ".tmp", 0o644)
        os.rename(path + ".tmp", path)
        written.append(path)
    return written


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = fleet_report_save.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        try:
            return {"written": save(args["folder"], args["files"])}
        except (IOError, OSError) as error:
            raise AnsibleActionFail("fleet_report_save: %s" % error)
