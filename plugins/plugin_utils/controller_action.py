# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The shape every controller action of the collection shares: arguments checked against the
documented module's ARGUMENT_SPEC, nothing sent to the host, the answer never a change."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase


class ControllerAction(ActionBase):
    """Subclasses set ARGUMENT_SPEC (from their module's stub) and write ``answer``."""

    TRANSFERS_FILES = False
    ARGUMENT_SPEC = {}

    @property
    def _VALID_ARGS(self):  # pylint: disable=invalid-name  # ActionBase's name
        return frozenset(self.ARGUMENT_SPEC)

    def answer(self, args, task_vars):
        """The result's fields from the validated ``args``."""
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super(ControllerAction, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(self.ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("%s: %s" % (self._task.action, "; ".join(checked.error_messages)))
        result.update(self.answer(checked.validated_parameters, task_vars or {}))
        result["changed"] = False
        return result
