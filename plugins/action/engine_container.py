# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.engine_container: the start, restart or stop run by the host's own
Python with no AnsiballZ where the connection pipelines (plugin_utils/box_reader.py), else by the
module, and always by the module in check mode; one answer either way (module_utils/engine_container.py's
run_module)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_container
from ansible_collections.glm53.tensorfold.plugins.modules.engine_container import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.box_reader_action import BoxReaderAction


class ActionModule(BoxReaderAction):
    MODULE, ARGUMENT_SPEC, READER_MODULES, FUNCTION = (
        "glm53.tensorfold.engine_container", ARGUMENT_SPEC, engine_container.READER_MODULES, "on_box")
    READS_ONLY = False
