# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record
from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import (
    build_report, host_line)

REVISION = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
TAG = "3f2a9c0d1e4b5a6978812345"


def live_facts(host, port=8020, warnings=None):
    return {
        "gpu_host_checks_result": {"status": "warn", "problems": [record("W_P2P", host, "NVML reports no peer-to-peer between the cards")]},
        "tensorfold_image_ref": "glm53-tensorfold:" + TAG,
        "tensorfold_image_tag": TAG,
        "weights_fetch_model_revision": REVISION,
        "rank_container_result": {"status": "running", "endpoint": "http://127.0.0.1:%d" % port, "context": 262144,
                                  "streams": 4, "log_dir": "/srv/glm53/logs/current", "warnings": warnings or []},
        "smoke_test_result": {"status": "live", "endpoint": "http://%s:%d/v1" % (host, port), "reply": "Hello.", "problems": []},
        "fleet_report_reached_end": True,
    }


def test_live_host_shows_endpoint_window_streams_tag_revision_and_warnings():
    line = host_line("gpu-a", live_facts("gpu-a"))
    assert line["status"] == "live"
    assert line["label"] == "LIVE"
    assert line["endpoint"] == "http://gpu-a:8020/v1"
    assert (line["context"], line["streams"]) == (262144, 4)
    assert line["image_tag"] == TAG and line["revision"] == REVISION
    assert len(line["warnings"]) == 1 and line["warnings"][0].startswith("[W_P2P] gpu-a:")
    assert line["todo"] == ""


def test_host_that_failed_checks_is_failed_with_its_codes_and_what_to_do():
    facts = {
        "gpu_host_checks_result": {"status": "fail", "problems": [
            record("E_GPU_BUSY", "gpu-c", "GPU 1 uses 30000 MiB (python, pid 4242)"),
            record("W_P2P", "gpu-c", "no peer-to-peer"),
        ]},
        "step_failure": {"stage": "gpu_host_checks", "task": "Report every problem of this host",
                         "message": ["[E_GPU_BUSY] gpu-c: GPU 1 uses 30000 MiB (python, pid 4242). Stop the workload on that GPU."]},
    }
    line = host_line("gpu-c", facts)
    assert line["status"] == "failed"
    assert line["codes"] == ["E_GPU_BUSY"]
    assert line["label"] == "failed (E_GPU_BUSY)"
    assert line["stage"] == "gpu_host_checks"
    assert "Stop the workload on that GPU" in line["todo"]
    assert line["warnings"] == ["[W_P2P] gpu-c: no peer-to-peer. "
                                "NCCL still works over host memory, but more slowly; check IOMMU/ACS and the BIOS."]
    assert line["endpoint"] == "" and line["context"] is None


def test_several_codes_in_one_failure_message_are_all_reported():
    failure = {"stage": "pre-flight", "task": "Report every settings problem of this host",
               "message": ["[E_SETTINGS] h: tensorfold_parallel is 0. Use 1 to 8.", "[E_SETTINGS] h: tensorfold_port is 0. Use a port.",
                           "[E_PORT] h: port 8020 is in use. Stop it."]}
    line = host_line("h", {"step_failure": failure})
    assert line["codes"] == ["E_SETTINGS", "E_PORT"]
    assert len(line["errors"]) == 3


def test_uncoded_failure_keeps_its_message_and_says_how_to_rerun():
    line = host_line("h", {"step_failure": {"stage": "weights_fetch", "task": "Download", "message": "Connection refused"}})
    assert line["status"] == "failed" and line["codes"] == []
    assert line["todo"].startswith("Connection refused")
    assert "--limit h" in line["todo"]


def test_host_without_any_fact_is_unreachable():
    line = host_line("gpu-z", {})
    assert line["status"] == "unreachable"
    assert "--limit gpu-z" in line["todo"]


def test_host_the_step_guard_found_unreachable_is_unreachable_and_keeps_its_stage():
    failure = {"stage": "restart", "task": "Fail a host Ansible cannot reach, with its code",
               "message": "[E_UNREACHABLE] gpu-b: Ansible cannot reach it (ssh: connection refused). Check it."}
    line = host_line("gpu-b", {"step_failure": failure, "fleet_report_reached_end": True})
    assert (line["status"], line["stage"]) == ("unreachable", "restart")
    assert "--limit gpu-b" in line["todo"]
    other = dict(failure, message="[E_START] gpu-b: rank 1 exited. Read the logs. " + failure["message"])
    assert host_line("gpu-b", {"step_failure": other})["status"] == "failed"


def test_host_that_reached_the_end_without_smoke_is_skipped_or_stopped():
    assert host_line("h", {"fleet_report_reached_end": True})["status"] == "skipped"
    stopped = {"fleet_report_reached_end": True, "rank_container_result": {"status": "stopped"}}
    assert host_line("h", stopped)["status"] == "stopped"
    planned = {"fleet_report_reached_end": True, "smoke_test_result": {"status": "planned"}}
    assert host_line("h", planned)["status"] == "planned"


def test_heals_outcome_gives_the_line_of_a_box_it_left_alone():
    # heal.yml restarts only failing boxes: a healthy one answered a real completion in this run.
    end = {"fleet_report_reached_end": True}
    healthy = dict(end, gateway_healed={"status": "healthy", "text": "healthy, left alone",
                                        "endpoint": "http://10.0.0.5:8020/v1"})
    line = host_line("h", healthy)
    assert (line["status"], line["endpoint"], line["todo"]) == ("live", "http://10.0.0.5:8020/v1", "")
    stopped = host_line("h", dict(end, gateway_healed={"status": "stopped", "text": "stopped on purpose, left alone"}))
    assert stopped["status"] == "stopped" and stopped["todo"].startswith("Stopped on purpose")
    never = host_line("h", dict(end, gateway_healed={"status": "not_deployed", "text": "never deployed"},
                                rank_container_result={"status": "not_deployed"}))
    assert never["status"] == "skipped" and never["todo"] == "Never deployed: run site.yml to deploy it."
    # heal.yml --check (a plan run) on a box never deployed: nothing there to plan.
    never_planned = host_line("h", dict(end, rank_container_result={"status": "not_deployed", "endpoint": ""}), plan=True)
    assert never_planned["status"] == "skipped" and never_planned["todo"].startswith("Never deployed")
    # A restart's failed smoke test still fails the box, whatever heal recorded before it.
    failed = dict(end, gateway_healed={"status": "restarted", "text": "restarted"},
                  smoke_test_result={"status": "failed", "problems": [record("E_SMOKE", "h", "no answer")]})
    assert host_line("h", failed)["status"] == "failed"


def test_failed_smoke_test_fails_the_host_with_its_reply():
    facts = live_facts("h")
    facts["smoke_test_result"] = {"status": "failed", "endpoint": "http://h:8020/v1", "reply": "",
                                  "problems": [record("E_SMOKE", "h", "the chat reply was empty (HTTP 200, body {...})")]}
    facts["step_failure"] = {
        "stage": "smoke_test", "task": "Fail",
        "message": ["[E_SMOKE] h: the chat reply was empty (HTTP 200, body {...}). Read the reply above and rank0.log."]}
    line = host_line("h", facts)
    assert line["status"] == "failed" and line["codes"] == ["E_SMOKE"]
    assert line["errors"] and len(line["errors"]) == 1  # the record and the failure text are one problem


def test_rank_warnings_given_as_text_are_reported():
    line = host_line("h", live_facts("h", warnings=["[W_STREAMS] h: 3 streams came up, 4 asked."]))
    assert any(text.startswith("[W_STREAMS]") for text in line["warnings"])


def test_report_counts_every_status_and_is_json_serialisable():
    report = build_report({
        "gpu-a": live_facts("gpu-a"),
        "gpu-b": live_facts("gpu-b", port=8021),
        "gpu-c": {"step_failure": {"stage": "pre-flight", "task": "x", "message": "[E_SETTINGS] gpu-c: bad. Fix it."}},
        "gpu-d": None,
    }, generated_at="2026-11-29T11:00:00Z")
    assert report["summary"] == {"hosts": 4, "live": 2, "failed": 1, "unreachable": 1, "stopped": 0, "planned": 0, "skipped": 0}
    assert [line["host"] for line in report["hosts"]] == ["gpu-a", "gpu-b", "gpu-c", "gpu-d"]
    assert json.loads(json.dumps(report)) == report


def test_the_report_carries_its_summary_line_and_each_host_s_warning_codes():
    report = build_report({
        "gpu-a": live_facts("gpu-a", warnings=["[W_STREAMS] gpu-a: 3 streams came up.", "[W_STREAMS] gpu-a: again."]),
        "gpu-c": {"step_failure": {"stage": "gpu_host_checks", "task": "x",
                                   "message": "[E_GPU_MEMORY] gpu-c: GPU 0 has 10000 MiB free. Stop what holds the GPU's memory."}},
    })
    assert report["summary_text"] == "2 hosts: 1 LIVE, 1 failed, 0 unreachable"
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-a"]["warning_codes"] == ["W_P2P", "W_STREAMS"]
    assert lines["gpu-c"]["warning_codes"] == []


def test_host_the_run_stopped_taking_is_skipped_with_the_reason():
    facts = {"fleet_report_reached_end": True,
             "step_stopped": "The run stopped before restart on this host: gpu-a failed, more than 0% of 3 hosts."}
    line = host_line("gpu-b", facts)
    assert line["status"] == "skipped"
    assert line["todo"].startswith("The run stopped before restart on this host: gpu-a failed")
    assert "Fix the failed hosts" in line["todo"]


def test_in_a_plan_run_hosts_that_came_through_are_planned_and_failures_stay_failures():
    report = build_report({
        "a": {"fleet_report_reached_end": True},
        "b": {"fleet_report_reached_end": True,
              "step_failure": {"stage": "gpu_host_checks", "task": "t", "message": "[E_DISK] b: 20 GiB free. Free space."}},
        "c": {},
    }, plan=True)
    assert [(line["host"], line["status"]) for line in report["hosts"]] == [("a", "planned"), ("b", "failed"), ("c", "unreachable")]
