# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.settings_check: every role's settings of this host, on the controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import yaml

from ansible.plugins.action import ActionBase

from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec

ROLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "roles")


def _role_specs():
    specs = {}
    for path in sorted(glob.glob(os.path.join(ROLES, "*", "meta", "argument_specs.yml"))):
        with open(path) as handle:
            specs[os.path.basename(os.path.dirname(os.path.dirname(path)))] = yaml.safe_load(handle)
    return specs


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset()

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        spec = settings_spec.merge_specs(_role_specs())
        values = {}
        for name in spec:
            if name not in task_vars:
                continue
            try:
                values[name] = self._templar.template(task_vars[name])
            except Exception:  # pylint: disable=broad-except  # a value that needs host facts: its role checks it
                continue
        host = task_vars.get("inventory_hostname", "host")
        problems = settings_spec.settings_problems(spec, values, host)
        result.update(changed=False, problems=problems, ansible_facts={"tensorfold_settings_problems": problems})
        return result
