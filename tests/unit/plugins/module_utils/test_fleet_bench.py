# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import fleet_bench
from ansible_collections.glm53.tensorfold.plugins.module_utils.bench_chart import render
from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_bench import (
    RECIPE, aiperf_command, compare, likely_causes, read_aiperf_export)
from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import build_report
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "aiperf_0.13.0_decode_4.json")
CASE = {"name": "decode_4", "streams": 4, "prompt_tokens": 128, "reply_tokens": 100, "requests": 8, "max_seconds": 60}


def result(per_stream, kind="box"):
    cases = {"decode_1": {"per_stream": per_stream, "total": per_stream, "ttft_p50_ms": 50.0, "ttft_p99_ms": 60.0},
             "decode_4": {"per_stream": per_stream * 0.45, "total": per_stream * 1.8, "ttft_p50_ms": 120.0,
                          "ttft_p99_ms": 150.0},
             "prefill_4k": {"prefill": 5900.0, "ttft_p50_ms": 700.0},
             "prefill_32k": {"prefill": 6000.0, "ttft_p50_ms": 5500.0}}
    return {"kind": kind, "status": "measured", "url": "http://x:8020", "cases": cases, "exports": {}}


def test_reads_a_real_aiperf_export():
    with open(FIXTURE) as handle:
        figures = read_aiperf_export(json.load(handle), CASE)
    assert round(figures["per_stream"], 1) == 99.9
    assert round(figures["total"], 1) == 390.1
    assert figures["requests"] == 8 and figures["errors"] == 0
    assert figures["ttft_p99_ms"] >= figures["ttft_p50_ms"] > 0
    assert figures["prefill"] == round(128 / (figures["ttft_p50_ms"] / 1000.0), 1)


def test_command_is_bounded_and_carries_no_key():
    argv = aiperf_command("/v/bin/aiperf", "http://b:8020", "GLM-5.3-Flash", "/tok", CASE, "/out", {"ignore_eos": True})
    assert argv[argv.index("--request-count") + 1] == "8"
    assert argv[argv.index("--benchmark-duration") + 1] == "60"
    assert argv[argv.index("--concurrency") + 1] == "4"
    assert argv[argv.index("--isl") + 1] == "128" and argv[argv.index("--osl") + 1] == "100"
    assert argv[-2:] == ["--extra-inputs", "ignore_eos:true"]
    assert "--api-key" not in argv
    # Nothing from the controller's own GPUs (DCGM on its localhost) or the target's /metrics.
    assert "--no-gpu-telemetry" in argv and "--no-server-metrics" in argv


def test_ratio_to_median_flags_the_half_speed_box_only():
    out = compare({"a": result(240.0), "b": result(250.0), "c": result(120.0), "gw": result(200.0, "gateway")}, 0.85)
    assert out["median"] == 240.0
    assert out["hosts"]["c"]["slow"] and out["hosts"]["c"]["ratio"] == 0.5
    assert not out["hosts"]["a"]["slow"] and not out["hosts"]["b"]["slow"]
    assert "gw" not in out["hosts"]


def test_a_box_just_above_the_threshold_is_not_flagged():
    out = compare({"a": result(100.0), "b": result(100.0), "c": result(86.0)}, 0.85)
    assert not out["hosts"]["c"]["slow"]


def test_likely_causes_name_the_checks_and_an_odd_driver():
    assert likely_causes(["W_P2P", "W_POWER"]) == [
        "no peer-to-peer between the cards (W_P2P)", "a power limit unlike the recipe's 400 W (W_POWER)"]
    assert likely_causes([], "570.1", ["580.2", "580.2", "570.1"]) == ["driver 570.1 where most boxes run 580.2"]
    assert likely_causes([], "580.2", ["580.2", "580.2", "570.1"]) == []


def test_report_flags_w_slow_with_causes_and_links_the_picture():
    def facts(host, speed, p2p=False, driver="580.2"):
        checks = {"status": "warn" if p2p else "pass",
                  "problems": [record("W_P2P", host, "NVML reports no peer-to-peer between the cards")] if p2p else []}
        return {"fleet_bench_result": result(speed), "gpu_host_checks_result": checks, "fleet_report_reached_end": True,
                "gpu_host_checks_gpus": [{"index": 0, "driver_version": driver}]}
    report = build_report({"a": facts("a", 245.0), "b": facts("b", 240.0), "c": facts("c", 118.0, True, "570.1")},
                          slow_ratio=0.85)
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["a"]["status"] == "live"
    slow = [w for w in lines["c"]["warnings"] if w.startswith("[W_SLOW] c:")]
    assert len(slow) == 1 and "W_P2P" in slow[0] and "driver 570.1 where most boxes run 580.2" in slow[0]
    assert not any("W_SLOW" in w for w in lines["a"]["warnings"] + lines["b"]["warnings"])
    markdown = "\n".join(report["bench_lines"])  # the section the report's template prints
    assert "| *recipe* | %s" % RECIPE["decode_1"]["per_stream"] in markdown
    assert "**0.49 W_SLOW**" in markdown and "](fleet-bench.png)" in markdown
    png = render(report)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000


def test_no_bench_no_section():
    report = build_report({"a": {"fleet_report_reached_end": True}})
    assert "bench" not in report and "bench_lines" not in report


def _result(status, per_stream, kind="box"):
    return {"kind": kind, "status": status, "url": "http://b:8020", "cases": {"decode_4": {"per_stream": per_stream}}}


def test_baselines_keep_a_box_not_measured_this_run_and_take_a_measured_ones_figures():
    previous = {"hosts": {"box-a": {"measured_at": "t0", "url": "http://a:8020", "cases": {"decode_4": {"per_stream": 90.0}}}}}
    updated = fleet_bench.update_baselines(previous, {"box-a": None, "box-b": _result("measured", 80.0)}, "t1")
    assert updated["hosts"]["box-a"] == previous["hosts"]["box-a"]
    assert updated["hosts"]["box-b"] == {"measured_at": "t1", "url": "http://b:8020",
                                         "cases": {"decode_4": {"per_stream": 80.0}}}
    assert sorted(previous["hosts"]) == ["box-a"]  # the previous record is left as it was


def test_baselines_ignore_a_check_mode_bench_a_box_not_live_and_the_gateway():
    previous = {"hosts": {"box-a": {"measured_at": "t0", "url": "u", "cases": {"decode_4": {"per_stream": 90.0}}}}}
    results = {"box-a": _result("planned", 1.0), "box-b": {"kind": "box", "status": "not_live", "url": "u"},
               "gw": _result("measured", 300.0, kind="gateway")}
    assert fleet_bench.update_baselines(previous, results, "t1") == previous


def test_baselines_are_read_from_their_file_and_a_file_that_is_no_record_is_refused():
    assert fleet_bench.parse_baselines(None) == {"hosts": {}}
    assert fleet_bench.parse_baselines('{"hosts": {"box-a": {"cases": {}}}}') == {"hosts": {"box-a": {"cases": {}}}}
    for text in ('{"hosts": ', '[1]', '{"hosts": {"box-a": 3}}', '{"box-a": {}}'):
        with pytest.raises(ValueError):
            fleet_bench.parse_baselines(text)
