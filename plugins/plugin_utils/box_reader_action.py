# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The action of a module that the box reader can run (box_reader.py; apart from it so that the
modules' unit tests, which cannot import Ansible's controller code, can use the reader)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.plugin_utils.box_reader import read_or_run


class BoxReaderAction(ActionBase):
    """The action of a module whose work a module_utils function does: the box reader where it can
    run, else the module. Subclasses set MODULE, ARGUMENT_SPEC (the module's), READER_MODULES and
    FUNCTION; and READS_ONLY = False for a module that changes the host: its answer says whether it
    did, and a check run goes to the module (box_module has no check mode)."""

    TRANSFERS_FILES = False
    MODULE, ARGUMENT_SPEC, READER_MODULES, FUNCTION = None, {}, (), None
    READS_ONLY = True

    @property
    def _VALID_ARGS(self):  # pylint: disable=invalid-name  # ActionBase's name
        return frozenset(self.ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(BoxReaderAction, self).run(tmp, task_vars)
        result.update(read_or_run(self, task_vars, self.MODULE, self.ARGUMENT_SPEC, self._task.args,
                                  self.READER_MODULES, self.FUNCTION, reader=self.READS_ONLY or not self._task.check_mode))
        if self.READS_ONLY:
            result["changed"] = False
        return result
