# -*- coding: utf-8 -*-
"""The shape every controller action shares (plugin_utils/controller_action.py): the task's
arguments checked against the documented module's spec before anything is answered, never a
change; and each controller action checks against its own module's documented spec."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

import pytest

from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import file_entry, inputs
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction

# Controller actions whose module file only documents them (module_utils/controller_action.refuse_on_host).
ACTIONS = ["fleet_report_info", "gateway_plan", "gpu_host_verdict", "host_plan", "image_inputs", "report_files"]


class FakeTask(object):
    async_val = 0
    check_mode = False

    def __init__(self, action, args):
        self.action = action
        self.args = args


class FakeShell(object):
    tmpdir = "/tmp/not-used"


class FakeConnection(object):
    _shell = FakeShell()


def make(cls, args, action="glm53.tensorfold.example"):
    return cls(FakeTask(action, args), FakeConnection(), PlayContext(), loader=None, templar=None, shared_loader_obj=None)


class Doubling(ControllerAction):
    ARGUMENT_SPEC = {"count": {"type": "int", "required": True}, "label": {"type": "str", "default": "n"}}
    answered = []

    def answer(self, args, task_vars):
        Doubling.answered.append(args)
        return {"twice": args["count"] * 2, "changed": True}


def test_arguments_are_converted_defaults_filled_and_the_answer_is_never_a_change():
    result = make(Doubling, {"count": "21"}).run(task_vars={})
    assert result["twice"] == 42 and result["changed"] is False
    assert Doubling.answered[-1] == {"count": 21, "label": "n"}


@pytest.mark.parametrize("args,words", [({}, "missing required arguments: count"),
                                        ({"count": "many"}, "count"),
                                        ({"count": 1, "colour": "red"}, "Invalid options")])
def test_bad_arguments_fail_naming_the_action_before_anything_is_answered(args, words):
    before = len(Doubling.answered)
    with pytest.raises(AnsibleActionFail, match=words) as raised:
        make(Doubling, args).run(task_vars={})
    assert "glm53.tensorfold.example" in str(raised.value)
    assert len(Doubling.answered) == before


@pytest.mark.parametrize("name", ACTIONS)
def test_each_action_checks_against_its_documented_module_spec(name):
    action = importlib.import_module("ansible_collections.glm53.tensorfold.plugins.action." + name).ActionModule
    module = importlib.import_module("ansible_collections.glm53.tensorfold.plugins.modules." + name)
    assert issubclass(action, ControllerAction)
    assert action.ARGUMENT_SPEC is module.ARGUMENT_SPEC
    with pytest.raises(AnsibleActionFail, match="Invalid options"):
        make(action, {"not_an_option": 1}, "glm53.tensorfold." + name).run(task_vars={})


def test_image_inputs_answers_what_module_utils_computes_for_the_host_it_runs_for():
    from ansible_collections.glm53.tensorfold.plugins.action.image_inputs import ActionModule
    series = [file_entry("0001-a.patch", b"a\n", "recipe"), file_entry("0001-b.patch", b"b\n", "site")]
    args = {"series": series, "dockerfile": "FROM scratch\n", "pins": {"ZIG_VERSION": "0.15.2"}}
    result = make(ActionModule, args, "glm53.tensorfold.image_inputs").run(task_vars={"inventory_hostname": "gpu-a"})
    expected = inputs(series, "gpu-a", "FROM scratch\n", {"ZIG_VERSION": "0.15.2"})
    assert result["tag"] == expected["tag"] and result["build_args"] == expected["build_args"]
    assert result["problems"] == expected["problems"] and result["problems"]  # 0001 twice
    assert all(problem["host"] == "gpu-a" for problem in result["problems"])
