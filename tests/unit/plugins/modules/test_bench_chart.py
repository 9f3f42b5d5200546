# -*- coding: utf-8 -*-
"""bench_chart writes the fleet report's picture where it is asked to, in one step (no half
written file is ever at dest), making the folder it needs, and says how big it is."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import build_report
from ansible_collections.glm53.tensorfold.plugins.modules import bench_chart


def measured(per_stream):
    cases = {"decode_1": {"per_stream": per_stream, "total": per_stream, "ttft_p50_ms": 50.0, "ttft_p99_ms": 60.0},
             "decode_4": {"per_stream": per_stream * 0.45, "total": per_stream * 1.8, "ttft_p50_ms": 120.0,
                          "ttft_p99_ms": 150.0},
             "prefill_4k": {"prefill": 5900.0, "ttft_p50_ms": 700.0},
             "prefill_32k": {"prefill": 6000.0, "ttft_p50_ms": 5500.0}}
    return {"fleet_bench_result": {"kind": "box", "status": "measured", "url": "http://x:8020", "cases": cases,
                                   "exports": {}},
            "fleet_report_reached_end": True}


def test_the_picture_lands_whole_in_a_folder_made_for_it(tmp_path, run_module):
    report = build_report({"a": measured(245.0), "b": measured(118.0)}, slow_ratio=0.85)
    dest = tmp_path / "reports" / "bench" / "fleet-bench.png"
    result = run_module(bench_chart, report=report, dest=str(dest))
    assert not result.get("failed") and result["dest"] == str(dest)
    data = dest.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and result["size"] == len(data)
    assert os.listdir(str(dest.parent)) == ["fleet-bench.png"]  # no .tmp left beside it


def test_a_report_is_required(run_module, tmp_path):
    result = run_module(bench_chart, dest=str(tmp_path / "x.png"))
    assert result["failed"] is True and "report" in result["msg"]
    assert not (tmp_path / "x.png").exists()
