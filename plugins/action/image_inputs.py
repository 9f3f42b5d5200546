# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.image_inputs: the patch series' problems, its hash and the image tag,
on the controller (module_utils/image_inputs.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import inputs
from ansible_collections.glm53.tensorfold.plugins.modules import image_inputs
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = image_inputs.ARGUMENT_SPEC

    def answer(self, args, task_vars):
        return inputs(args["series"], task_vars.get("inventory_hostname", "host"), args["dockerfile"], args["pins"],
                      args["expected_count"])
