# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.converged_info: the box read with its own Python and no AnsiballZ
where the connection pipelines (plugin_utils/box_reader.py), else the module; one answer either way
(module_utils/converged.py's read_box). With ``hosts`` (a run_once task), the same read of each of
those hosts from this one worker (plugin_utils/each_host.py), their answers under ``boxes``."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged
from ansible_collections.glm53.tensorfold.plugins.modules.converged_info import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils import each_host
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.box_reader_action import BoxReaderAction


class ActionModule(BoxReaderAction):
    MODULE, ARGUMENT_SPEC, READER_MODULES, FUNCTION = (
        "glm53.tensorfold.converged_info", ARGUMENT_SPEC, converged.READER_MODULES, "read_box")

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        hosts = self._task.args.get("hosts")
        # Filled here, not templated from the task (`{{ inventory_hostname }}`): a template is
        # compiled anew for every host of a batch read.
        self._task.args.setdefault("host_label", task_vars.get("inventory_hostname"))
        if hosts is None:
            return super(ActionModule, self).run(tmp, task_vars)
        boxes = each_host.run_each(self, task_vars, hosts)
        if boxes is None:  # no worker to run them from: this host's own answer; the others go the normal way
            self._task.args.pop("hosts")
            own = task_vars.get("inventory_hostname")
            boxes = {own: super(ActionModule, self).run(tmp, task_vars)} if own in hosts else {}
        return {"changed": False, "boxes": boxes}
