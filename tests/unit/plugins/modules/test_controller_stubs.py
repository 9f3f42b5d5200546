# -*- coding: utf-8 -*-
"""A controller action's module file (its documentation) run on a host without its action plugin,
e.g. by a tool that executes module files directly: it checks its options and then fails,
saying where it runs, instead of doing half of the work (module_utils/controller_action.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

import pytest

STUBS = ["fleet_report_info", "gateway_plan", "gpu_host_verdict", "host_plan", "image_build", "image_inputs",
         "report_files", "settings_check"]


def module(name):
    return importlib.import_module("ansible_collections.glm53.tensorfold.plugins.modules." + name)


def valid_args(name):
    """The least a call needs: a value of the right type for each required option."""
    values = {"str": "x", "path": "/x", "dict": {}, "int": 1, "bool": False}

    def value(spec):
        if spec.get("type") == "list":
            return [values[spec.get("elements", "str")]]
        return values[spec.get("type", "str")]
    return dict((option, value(spec)) for option, spec in getattr(module(name), "ARGUMENT_SPEC", {}).items()
                if spec.get("required"))


@pytest.mark.parametrize("name", STUBS)
def test_on_a_host_it_says_it_runs_on_the_controller(run_module, name):
    result = run_module(module(name), **valid_args(name))
    assert result["failed"] is True
    assert result["msg"] == "glm53.tensorfold.%s runs on the controller as an action plugin" % name


@pytest.mark.parametrize("name", [n for n in STUBS if valid_args(n)])
def test_its_options_are_checked_first(run_module, name):
    result = run_module(module(name))
    assert result["failed"] is True and result["msg"].startswith("missing required arguments")
