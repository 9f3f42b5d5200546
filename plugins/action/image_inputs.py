# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.image_inputs: the patch series' problems, its hash and the image tag,
on the controller (module_utils/image_inputs.py holds the rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils import image_inputs
from ansible_collections.glm53.tensorfold.plugins.modules.image_inputs import ARGUMENT_SPEC


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("image_inputs: %s" % "; ".join(checked.error_messages))
        args = checked.validated_parameters
        host = (task_vars or {}).get("inventory_hostname", "host")
        result.update(image_inputs.inputs(args["series"], host, args["dockerfile"], args["pins"], args["expected_count"]))
        result["changed"] = False
        return result
