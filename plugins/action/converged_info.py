# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.converged_info: the box read with its own Python and no AnsiballZ
where the connection pipelines (plugin_utils/box_reader.py), else the module; one answer either way
(module_utils/converged.py's read_box)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged
from ansible_collections.glm53.tensorfold.plugins.modules.converged_info import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.box_reader_action import BoxReaderAction


class ActionModule(BoxReaderAction):
    MODULE, ARGUMENT_SPEC, READER_MODULES, FUNCTION = (
        "glm53.tensorfold.converged_info", ARGUMENT_SPEC, converged.READER_MODULES, "read_box")
