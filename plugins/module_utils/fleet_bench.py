# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The bench's figures: the load tool's command per case, its export read back, and each box
compared with the fleet's median and the recipe's published figures.

Pure functions (no Ansible imports). The load tool is aiperf (docs/bench.md says why); its JSON
export (``profile_export_aiperf.json``) carries each metric as ``{unit, avg, p50, p99, ...}``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

# The recipe's published figures (two RTX PRO 6000 at 400 W): decode per stream and in total,
# prefill tokens a second, and the first token's time in ms.
RECIPE = {
    "decode_1": {"per_stream": 245.5, "total": 245.5, "ttft_ms": 54},
    "decode_4": {"per_stream": 110.3, "total": 436.6, "ttft_ms": 122},
    "prefill_4k": {"prefill": 5943.1, "ttft_ms": 753},
    "prefill_32k": {"prefill": 6033.1, "ttft_ms": 5490},
}

# The figure a box is ranked by: one stream's decode speed, the recipe's headline number.
RANK_CASE, RANK_FIGURE = "decode_1", "per_stream"


def aiperf_command(aiperf, url, model, tokenizer, case, artifact_dir, extra_inputs=None):
    """The argv of one bounded aiperf run: a fixed prompt and reply length, a request count and
    a time limit. The API key never appears here (the load_test module hands it over through an
    inherited pipe)."""
    argv = [aiperf, "profile"]
    argv += ["--model", model, "--url", url, "--endpoint-type", "chat", "--streaming",
             "--tokenizer", tokenizer,
             "--isl", str(int(case["prompt_tokens"])), "--isl-stddev", "0",
             "--osl", str(int(case["reply_tokens"])), "--osl-stddev", "0",
             "--concurrency", str(int(case["streams"])),
             "--request-count", str(int(case["requests"])),
             "--benchmark-duration", str(int(case["max_seconds"])), "--benchmark-grace-period", "30",
             "--request-timeout-seconds", str(int(case["max_seconds"])),
             "--random-seed", "1", "--use-server-token-count", "--use-legacy-max-tokens",
             "--ui-type", "none", "--no-auto-plot", "--artifact-dir", artifact_dir,
             # aiperf runs on the controller: by default it reads GPU telemetry from DCGM on the
             # controller's own localhost (not the box's GPUs) and scrapes the target's /metrics
             # (the engine's needs a key). The report reads neither; each is a process less.
             "--no-gpu-telemetry", "--no-server-metrics"]
    extras = ["%s:%s" % (k, json.dumps(v) if isinstance(v, bool) else v) for k, v in sorted((extra_inputs or {}).items())]
    if extras:
        argv += ["--extra-inputs"] + extras
    return argv


def _stat(export, name, key):
    value = (export.get(name) or {}).get(key)
    return None if value is None else float(value)


def read_aiperf_export(export, case):
    """One case's figures from aiperf's JSON export (a dict)."""
    ttft_p50 = _stat(export, "time_to_first_token", "p50")
    completed = _stat(export, "request_count", "avg") or 0
    errors = _stat(export, "error_request_count", "avg") or 0
    isl = _stat(export, "input_sequence_length", "avg") or float(case["prompt_tokens"])
    figures = {
        "requests": int(completed),
        "errors": int(errors),
        "ttft_p50_ms": ttft_p50,
        "ttft_p99_ms": _stat(export, "time_to_first_token", "p99"),
        "per_stream": _stat(export, "output_token_throughput_per_user", "p50"),
        "total": _stat(export, "output_token_throughput", "avg"),
        "prompt_tokens": isl,
        "reply_tokens": _stat(export, "output_sequence_length", "avg"),
    }
    # Prefill: prompt tokens read a second, from the median time to the first token.
    figures["prefill"] = round(isl / (ttft_p50 / 1000.0), 1) if ttft_p50 else None
    return figures


def read_aiperf_dir(artifact_dir, case):
    path = os.path.join(artifact_dir, "profile_export_aiperf.json")
    with open(path) as handle:
        return read_aiperf_export(json.load(handle), case)


def _median(values):
    values = sorted(values)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def rank_value(result):
    case = ((result or {}).get("cases") or {}).get(RANK_CASE) or {}
    return case.get(RANK_FIGURE)


def compare(results, threshold=0.85):
    """Each box's ratio to the fleet's median (``results``: host -> fleet_bench_result).

    Returns ``{median, threshold, hosts: {host: {value, ratio, slow}}}``; the gateway (a result
    with ``kind: gateway``) is measured but not ranked among the boxes.
    """
    boxes = dict((h, rank_value(r)) for h, r in results.items() if r and r.get("kind", "box") == "box")
    measured = [v for v in boxes.values() if v]
    median = _median(measured)
    out = {"median": median, "threshold": float(threshold), "case": RANK_CASE, "figure": RANK_FIGURE, "hosts": {}}
    for host, value in boxes.items():
        ratio = round(value / median, 3) if value and median else None
        out["hosts"][host] = {"value": value, "ratio": ratio,
                              "slow": bool(ratio is not None and ratio < float(threshold))}
    return out


# Each box's last real bench, kept beside the fleet report (roles/fleet_report saves it): the
# fleet report is rewritten by every run and carries figures only when the bench ran in it, so
# the baselines monitoring compares live speed with live in a record of their own that only a
# measuring run updates.


def parse_baselines(text):
    """The baselines record from its file's text (None or empty: no record yet).

    Returns ``{"hosts": {host: {measured_at, url, cases}}}``; raises ValueError when the text is
    not such a record (hand-edited, truncated).
    """
    if text is None or not text.strip():
        return {"hosts": {}}
    try:
        record = json.loads(text)
    except ValueError as err:
        raise ValueError("not JSON (%s)" % err)
    hosts = record.get("hosts") if isinstance(record, dict) else None
    if not isinstance(hosts, dict) or not all(isinstance(entry, dict) for entry in hosts.values()):
        raise ValueError('not a baselines record ({"hosts": {BOX: {measured_at, url, cases}}})')
    return {"hosts": dict(hosts)}


def update_baselines(previous, results, measured_at):
    """``previous`` with the entry of each box this run measured replaced (``results``: host ->
    fleet_bench_result). Only real measurements count: a check-mode bench (``planned``), a box
    that was not LIVE and the gateway leave a box's last figures as they were."""
    hosts = dict((previous or {}).get("hosts") or {})
    for host, result in sorted((results or {}).items()):
        if not result or result.get("kind", "box") != "box" or result.get("status") != "measured":
            continue
        hosts[host] = {"measured_at": measured_at, "url": result.get("url"), "cases": result.get("cases") or {}}
    return {"hosts": hosts}


def likely_causes(codes, driver=None, fleet_drivers=None):
    """What the host checks saw that slows a box: W_P2P, W_POWER, a driver unlike the fleet's."""
    causes = []
    if "W_P2P" in codes:
        causes.append("no peer-to-peer between the cards (W_P2P)")
    if "W_POWER" in codes:
        causes.append("a power limit unlike the recipe's 400 W (W_POWER)")
    common = None
    if fleet_drivers:
        counts = {}
        for value in fleet_drivers:
            counts[value] = counts.get(value, 0) + 1
        common = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
    if driver and common and driver != common:
        causes.append("driver %s where most boxes run %s" % (driver, common))
    return causes


CHART_NAME = "fleet-bench.png"


def _num(value, fmt="%.1f"):
    return "-" if value is None else fmt % value


def render_markdown(report):
    """The fleet report's "Measured speed" section (lines of Markdown)."""
    bench = report.get("bench") or {}
    recipe = bench.get("recipe") or RECIPE
    out = ["", "## Measured speed", ""]
    out.append("Measured from the controller with aiperf; the fleet's median of one stream's decode speed is %s tok/s, "
               "and a box below %.2f of it is flagged W_SLOW. Each box's exports are kept per case."
               % (_num(bench.get("median")), float(bench.get("threshold", 0.85))))
    out += ["", "| host | decode, 1 stream: tok/s (TTFT p50/p99 ms) | 4 streams: tok/s per stream / total "
                "(TTFT p50/p99 ms) | prefill 4K: tok/s (TTFT ms) | prefill 32K: tok/s (TTFT ms) | ratio to median |",
            "|---|---|---|---|---|---|"]
    out.append("| *recipe* | %s (%s) | %s / %s (%s) | %s (%s) | %s (%s) | - |" % (
        recipe["decode_1"]["per_stream"], recipe["decode_1"]["ttft_ms"], recipe["decode_4"]["per_stream"],
        recipe["decode_4"]["total"], recipe["decode_4"]["ttft_ms"], recipe["prefill_4k"]["prefill"],
        recipe["prefill_4k"]["ttft_ms"], recipe["prefill_32k"]["prefill"], recipe["prefill_32k"]["ttft_ms"]))
    for line in report.get("hosts", []):
        entry = line.get("bench")
        if not entry:
            continue
        cases = entry.get("cases") or {}
        if not cases:
            out.append("| %s | %s | | | | |" % (line["host"], "not measured (%s)" % entry.get("status")))
            continue
        d1, d4 = cases.get("decode_1") or {}, cases.get("decode_4") or {}
        p4, p32 = cases.get("prefill_4k") or {}, cases.get("prefill_32k") or {}
        ratio = _num(entry.get("ratio"), "%.2f")
        if entry.get("slow"):
            ratio = "**%s W_SLOW**" % ratio
        elif entry.get("kind") == "gateway":
            ratio = "gateway"
        out.append("| %s | %s (%s/%s) | %s / %s (%s/%s) | %s (%s) | %s (%s) | %s |" % (
            line["host"], _num(d1.get("per_stream")), _num(d1.get("ttft_p50_ms"), "%.0f"),
            _num(d1.get("ttft_p99_ms"), "%.0f"), _num(d4.get("per_stream")), _num(d4.get("total")),
            _num(d4.get("ttft_p50_ms"), "%.0f"), _num(d4.get("ttft_p99_ms"), "%.0f"), _num(p4.get("prefill")),
            _num(p4.get("ttft_p50_ms"), "%.0f"), _num(p32.get("prefill")), _num(p32.get("ttft_p50_ms"), "%.0f"),
            ratio))
    out += ["", "![Measured speed per box; dashed lines: the recipe's figures](%s)" % CHART_NAME]
    return out
