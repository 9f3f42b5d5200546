# -*- coding: utf-8 -*-
"""The image_build action: it runs community.docker.docker_image_build with the options it was
given (never pulling), returns its result, and turns a failed build's output into the coded
message that names the cause."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.glm53.tensorfold.plugins.action.image_build import ActionModule, build_module_args

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "buildx")
COMMIT = "94264f315cef21670e528eb864de869e90f2a395"


class FakeTask(object):
    action = "glm53.tensorfold.image_build"
    async_val = 0
    check_mode = False

    def __init__(self, args):
        self.args = args


class FakeShell(object):
    tmpdir = "/tmp/not-used"


class FakeConnection(object):
    _shell = FakeShell()


def action(args, answer):
    """The action with docker_image_build replaced by ``answer`` (a dict), and the calls it made."""
    plugin = ActionModule(FakeTask(args), FakeConnection(), PlayContext(), loader=None, templar=None,
                          shared_loader_obj=None)
    calls = []

    def execute_module(module_name=None, module_args=None, task_vars=None, **kwargs):
        calls.append((module_name, module_args))
        return dict(answer)

    plugin._execute_module = execute_module
    return plugin, calls


ARGS = {"name": "tensorfold-native", "tag": "3f6c2a9d0b1e4f57", "path": "/var/lib/tf/context/3f6c2a9d0b1e4f57",
        "args": {"TENSORFOLD_COMMIT": COMMIT}, "engine_commit": COMMIT}


def test_the_build_module_gets_our_options_never_pulls_and_no_unset_network():
    got = build_module_args({"name": "n", "tag": "t", "path": "/p", "args": {"A": "1"}, "labels": {"l": "v"},
                             "rebuild": "never", "network": None, "engine_commit": COMMIT})
    assert got == {"name": "n", "tag": "t", "path": "/p", "args": {"A": "1"}, "labels": {"l": "v"},
                   "rebuild": "never", "pull": False}
    assert build_module_args(dict(got, network="host", engine_commit=""))["network"] == "host"


def test_a_successful_build_is_returned_as_the_module_gave_it():
    plugin, calls = action(ARGS, {"changed": True, "image": {"Id": "sha256:abc"}, "stdout": "done"})
    result = plugin.run(task_vars={"inventory_hostname": "gpu-a"})
    assert calls == [("community.docker.docker_image_build",
                      {"name": "tensorfold-native", "tag": "3f6c2a9d0b1e4f57", "path": ARGS["path"],
                       "args": ARGS["args"], "labels": {}, "rebuild": "never", "pull": False})]
    assert result["changed"] is True and result["image"] == {"Id": "sha256:abc"} and not result.get("failed")


def test_a_conflicting_patch_fails_the_task_naming_the_patch():
    with open(os.path.join(FIXTURES, "conflicting-patch.txt")) as handle:
        log = handle.read()
    plugin, calls = action(ARGS, {"failed": True, "msg": "Error building tensorfold-native:3f6c2a9d0b1e4f57", "stderr": log,
                                  "exception": "Traceback ... Error building"})
    result = plugin.run(task_vars={"inventory_hostname": "gpu-a"})
    assert result["failed"] is True
    assert result["msg"].startswith("[E_PATCHES] gpu-a: patch 0101-conflicting-change.patch does not apply cleanly "
                                    "on TensorFold 94264f315cef after the patches before it.")
    # Ansible prints a failed task's whole result: only the log's tail stays, the cause is in msg.
    assert result["stderr"].splitlines()[0] == "(%d earlier lines left out)" % (len(log.splitlines()) - 40)
    assert result["stderr"].splitlines()[1:] == log.splitlines()[-40:]
    assert len(calls) == 1  # one build: a failed one is not tried again
    assert "exception" not in result  # ansible-core would print the module's own error as the task's error line


def test_a_build_that_left_no_image_fails_with_e_docker_naming_the_builder():
    """buildx with a docker-container builder as the host's current one builds into its cache only and
    exits 0 with this warning (buildx's wording, as reported in uraimo/run-on-arch-action#126);
    docker_image_build then returns success with an empty ``image``."""
    warning = ("WARNING: No output specified with docker-container driver. Build result will only remain in the build "
               "cache. To push result image into registry use --push or to load image into docker use --load")
    plugin = action(ARGS, {"changed": True, "image": {}, "stdout": "#14 DONE 0.1s", "stderr": warning})[0]
    result = plugin.run(task_vars={"inventory_hostname": "gpu-a"})
    assert result["failed"] is True
    assert result["msg"].startswith("[E_DOCKER] gpu-a: the build of tensorfold-native:3f6c2a9d0b1e4f57 succeeded but left no "
                                    "image in Docker's image store, so the host's buildx builder is not Docker's own "
                                    "(WARNING: No output specified with docker-container driver."), result["msg"]
    assert result["msg"].endswith("(docker buildx use default; docker buildx ls marks the current builder with *), then run again.")


def test_an_image_already_there_or_check_mode_is_not_taken_for_a_lost_build():
    for answer in ({"changed": False, "image": {"Id": "sha256:abc"}}, {"changed": True, "image": {}, "actions": []}):
        result = action(ARGS, answer)[0].run(task_vars={"inventory_hostname": "gpu-a"})
        assert not result.get("failed"), answer


def test_a_module_that_crashed_keeps_ansibles_own_account():
    crashed = {"failed": True, "msg": "MODULE FAILURE: No start of json char found", "module_stderr": "python3: not found",
               "rc": 127}
    plugin = action(ARGS, crashed)[0]
    result = plugin.run(task_vars={"inventory_hostname": "gpu-a"})
    assert result["msg"] == crashed["msg"] and result["module_stderr"] == "python3: not found"


def test_bad_options_fail_before_anything_runs():
    plugin, calls = action(dict(ARGS, rebuild="sometimes"), {})
    with pytest.raises(AnsibleActionFail, match="rebuild"):
        plugin.run(task_vars={})
    plugin, calls = action(dict(ARGS, pull=True), {})
    with pytest.raises(AnsibleActionFail, match="Invalid options"):
        plugin.run(task_vars={})
    assert calls == []
