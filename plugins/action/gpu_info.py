# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.gpu_info: the GPUs read with the host's own Python and no AnsiballZ
where the connection pipelines (plugin_utils/box_reader.py), else the module; one answer either way
(module_utils/nvidia_smi_command.py's gpu_info_main)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi_command
from ansible_collections.glm53.tensorfold.plugins.modules.gpu_info import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.box_reader_action import BoxReaderAction


class ActionModule(BoxReaderAction):
    MODULE, ARGUMENT_SPEC, READER_MODULES, FUNCTION = (
        "glm53.tensorfold.gpu_info", ARGUMENT_SPEC, nvidia_smi_command.READER_MODULES, "gpu_info_on_box")
