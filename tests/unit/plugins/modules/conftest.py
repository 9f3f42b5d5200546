# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Run a module's main() in-process with arguments and get its result dict back."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    pass


@pytest.fixture
def run_module(monkeypatch):
    """run_module(module, **args) -> the result dict (failed=True when it called fail_json)."""

    def run(module, **args):
        outcome = {}

        def exit_json(self, **kwargs):
            outcome.update(kwargs)
            raise ModuleExit()

        def fail_json(self, **kwargs):
            outcome.update(kwargs, failed=True)
            raise ModuleExit()

        monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
        monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
        with patch_module_args(args), pytest.raises(ModuleExit):
            module.main()
        return outcome

    return run
