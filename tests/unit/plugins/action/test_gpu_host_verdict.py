# -*- coding: utf-8 -*-
"""The gpu_host_verdict action reading a host itself (host_resources): one module run with the
options it was given, judged at once; its problems shown as warnings, or failing the host with
every message; the checked GPUs published as a fact; a read that failed returned unjudged; and
the fleet summary counting a host without a verdict as failed."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
from types import SimpleNamespace

import pytest

from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.glm53.tensorfold.plugins.action.gpu_host_verdict import ActionModule

RTX = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


def gpu(index, used=2, processes=None):
    return {"index": index, "uuid": "GPU-%d" % index, "name": RTX, "memory_total_mib": 97887,
            "memory_used_mib": used, "memory_free_mib": 97887 - used, "power_limit_w": 400.0,
            "processes": processes or []}


# What host_resources answers when asked with docker and gpus (its gpu_info read in the same run).
ANSWER = {
    "changed": False, "system": "Linux", "architecture": "x86_64", "user": "root",
    "tools": {"curl": "/usr/bin/curl", "docker": "/usr/bin/docker"},
    "docker": {"ok": True, "error": "", "runtimes": ["nvidia", "runc"], "root_dir": "/var/lib/docker",
               "groups": None, "own_container_running": False},
    "filesystems": [{"mount": "/", "free_gib": 500.0, "need_gib": 40, "ok": True,
                     "paths": [{"name": "image build", "path": "/var/lib/docker", "need_gib": 40, "in_place": ""}]}],
    "memory_available_mib": 64000,
    "ports": [{"port": 8020, "free": True, "why": ""}],
    "gpu_info": {"gpus": [gpu(0), gpu(1)], "driver_version": "580.95.05", "cuda_version": "13.0",
                 "peer": {"read": {"0-1": "OK", "1-0": "OK"}, "write": {"0-1": "OK", "1-0": "OK"}, "peer_ok": True}},
}
READ = {"ports": [8020], "tools": ["curl", "docker"], "docker": True, "gpus": {"p2p_gpus": [1, 0]}}
EXPECT = {"gpu_count": 2, "gpu_indices": [1, 0], "model_pattern": "RTX PRO 6000 Blackwell", "min_driver": "580",
          "min_cuda": "13.0", "min_free_mib": 88000, "max_used_mib": 4096, "power_cap_w": 400, "p2p": True,
          "docker": True, "min_host_memory_gib": 16}


def plugin_for(args, templar=None):
    """The action for a task with ``args`` (what ActionBase reads of the task and the connection)."""
    task = SimpleNamespace(action="glm53.tensorfold.gpu_host_verdict", async_val=0, check_mode=False, args=args)
    # No pipelining: the module runs (the box reader's way is plugin_utils/test_box_reader.py's).
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None), is_pipelining_enabled=lambda wrap_async=False: False)
    return ActionModule(task, connection, PlayContext(), loader=None, templar=templar, shared_loader_obj=None)


def run(args, answer=None, task_vars=None):
    """The action's result with host_resources replaced by ``answer``, and the module runs it made."""
    plugin = plugin_for(args)
    calls = []

    def execute_module(module_name=None, module_args=None, task_vars=None, **kwargs):
        calls.append((module_name, module_args))
        return copy.deepcopy(answer)

    plugin._execute_module = execute_module
    return plugin.run(task_vars=dict({"inventory_hostname": "gpu-a"}, **(task_vars or {}))), calls


def test_one_module_run_on_the_host_with_the_options_given_and_a_clean_host_passes_quietly():
    result, calls = run({"host_resources": READ, "expect": EXPECT, "fail": True}, ANSWER)
    assert calls == [("glm53.tensorfold.host_resources", READ)]
    assert result["status"] == "pass" and result["problems"] == [] and result["changed"] is False
    assert [g["index"] for g in result["gpus"]] == [1, 0]
    assert result["ansible_facts"] == {"gpu_host_checks_gpus": result["gpus"]}
    assert "warnings" not in result and not result.get("failed")
    assert result["read_with"] == "module"  # no pipelining here


def test_with_fail_an_erroneous_host_fails_with_every_message_and_still_has_its_verdict():
    busy = copy.deepcopy(ANSWER)
    busy["gpu_info"]["gpus"][0] = gpu(0, used=20482, processes=[{"pid": 4242, "name": "python3", "used_memory_mib": 20480}])
    busy["memory_available_mib"] = 1024
    result = run({"host_resources": READ, "expect": EXPECT, "fail": True}, busy)[0]
    assert result["failed"] is True and result["status"] == "fail"
    assert [p["code"] for p in result["problems"]] == ["E_GPU_MEMORY", "E_GPU_BUSY", "W_MEMORY"]
    assert result["msg"] == [p["message"] for p in result["problems"]]
    assert result["msg"][1].startswith("[E_GPU_BUSY] gpu-a: GPU 0 uses 20482 MiB")
    assert result["msg"][2].startswith("[W_MEMORY] gpu-a: 1.0 GiB of host memory is available")
    # Without fail the same host only warns, every message shown.
    survey = run({"host_resources": READ, "expect": EXPECT}, busy)[0]
    assert not survey.get("failed") and survey["status"] == "fail" and survey["warnings"] == result["msg"]


def test_unreadable_gpus_are_judged_e_gpu_not_a_failed_read():
    answer = dict(ANSWER, gpu_info={"failed": True, "msg": "nvidia-smi is not on PATH"})
    result = run({"host_resources": READ, "expect": EXPECT}, answer)[0]
    assert [p["code"] for p in result["problems"]] == ["E_GPU"] and result["gpus"] == []
    assert result["warnings"] == [result["problems"][0]["message"]]
    assert "nvidia-smi is not on PATH" in result["warnings"][0]


def test_a_read_that_failed_is_returned_unjudged():
    crashed = {"failed": True, "changed": False, "msg": "MODULE FAILURE: See stdout/stderr for the exact error",
               "module_stderr": "/usr/bin/python3: not found", "rc": 127}
    result = run({"host_resources": READ, "expect": EXPECT, "fail": False}, crashed)[0]
    assert result["failed"] is True and result["msg"] == crashed["msg"] and result["rc"] == 127
    assert "status" not in result and "ansible_facts" not in result


def test_judging_given_results_still_works_and_needs_them():
    resources = dict((k, v) for k, v in ANSWER.items() if k != "gpu_info")
    result, calls = run({"resources": resources, "gpu_info": ANSWER["gpu_info"], "expect": EXPECT}, None)
    assert calls == [] and result["status"] == "pass"
    with pytest.raises(AnsibleActionFail, match="host_resources"):
        run({"resources": resources, "expect": EXPECT})


class Resolver(object):
    """ansible-core 2.19's templar, as far as the fleet summary asks it."""

    def __init__(self, hostvars):
        self.hostvars = hostvars

    def resolve_variable_expression(self, expression, local_variables):
        assert expression == "host_vars[name]"  # the host's variables read once (plugin_utils/hostvars.py)
        return local_variables["host_vars"][local_variables["name"]]


def test_the_fleet_summary_counts_a_host_whose_read_failed_as_no_result():
    hostvars = {"a": {"gpu_host_checks_result": {"status": "warn", "problems": [{"code": "W_P2P", "message": "m"}],
                                                 "changed": False, "warnings": ["m"]}},
                "b": {"gpu_host_checks_result": {"failed": True, "msg": "MODULE FAILURE"}},
                "c": {}}
    plugin = plugin_for({"fleet": ["a", "b", "c"]}, templar=Resolver(hostvars))
    fleet = plugin.run(task_vars={"hostvars": hostvars})["fleet"]
    assert fleet["lines"][0] == "a: warnings (W_P2P)"
    assert fleet["lines"][1:] == ["%s: FAIL (no result: the host was unreachable or failed before the checks)" % h
                                  for h in ("b", "c")]
    assert fleet["counts"] == {"pass": 0, "warn": 1, "fail": 2}


def test_expectations_given_as_text_are_judged_as_their_types():
    # -e gpu_host_checks_power_cap_w=300 and the like reach the task as text.
    text = dict((key, str(value).lower() if isinstance(value, bool) else str(value)) for key, value in EXPECT.items()
                if key != "gpu_indices")
    text.update(power_cap_w="300", gpu_count="2", min_host_memory_gib="16", p2p="false", gpu_indices=["1", "0"])
    result = run({"host_resources": READ, "expect": text}, ANSWER)[0]
    assert [p["code"] for p in result["problems"]] == ["W_POWER", "W_POWER"]
    assert "power limit is 400 W, above 300 W" in result["problems"][0]["message"]
    low = copy.deepcopy(ANSWER)
    low["memory_available_mib"] = 8192
    low["gpu_info"]["peer"] = {"read": {"0-1": "CNS", "1-0": "CNS"}, "write": {"0-1": "CNS", "1-0": "CNS"}}
    result = run({"host_resources": READ, "expect": dict(text, power_cap_w="0")}, low)[0]
    assert [p["code"] for p in result["problems"]] == ["W_MEMORY"]  # p2p "false" is false, 16 GiB a number


def test_expectations_left_out_take_their_defaults_and_unknown_or_bad_ones_are_refused():
    result = run({"host_resources": READ, "expect": {"model_pattern": "RTX PRO 6000"}}, ANSWER)[0]
    assert result["status"] == "pass" and [g["index"] for g in result["gpus"]] == [0, 1]
    with pytest.raises(AnsibleActionFail, match="power_cap"):
        run({"host_resources": READ, "expect": dict(EXPECT, power_cap="300")}, ANSWER)
    with pytest.raises(AnsibleActionFail, match="gpu_count"):
        run({"host_resources": READ, "expect": dict(EXPECT, gpu_count="two")}, ANSWER)
