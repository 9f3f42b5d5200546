# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.converged_info: the box read with its own python3 and no AnsiballZ
where the connection pipelines (plugin_utils/box_reader.py), else the module; one answer either way
(module_utils/converged.py's read_box)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged
from ansible_collections.glm53.tensorfold.plugins.modules.converged_info import ARGUMENT_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils import box_reader

MODULE = "glm53.tensorfold.converged_info"


def _host_expands(args):
    """Whether a path option holds something only the host can expand (``~``, ``$VAR``): the module's
    own check expands it there, the controller's would expand it here."""
    paths = [args.get("data_dir")] + [value for repo in args.get("weights") or [] if isinstance(repo, dict)
                                      for value in (repo.get("local_dir"), repo.get("state_dir"))]
    return any(isinstance(path, str) and ("~" in path or "$" in path) for path in paths)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        checked = ArgumentSpecValidator(ARGUMENT_SPEC).validate(self._task.args)
        if checked.error_messages:
            raise AnsibleActionFail("%s: %s" % (MODULE, "; ".join(checked.error_messages)))
        answer, read_with = None, "box reader"
        if not _host_expands(self._task.args):
            answer = box_reader.read(self, task_vars, converged.READER_MODULES, "read_box", checked.validated_parameters)
        if answer is None:
            answer, read_with = self._execute_module(module_name=MODULE, module_args=self._task.args, task_vars=task_vars), "module"
        result.update(answer)
        result["read_with"] = read_with
        result["changed"] = False
        return result
