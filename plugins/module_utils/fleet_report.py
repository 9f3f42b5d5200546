# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The fleet report: one line per host at the end of every run of site.yml.

Reads only the public facts the roles hand each other (docs/development.md), as gathered from
``hostvars`` by the fleet report play, plus the facts of site.yml's step guard (roles/step)
and of the report play:

``step_failure``
    set by the step guard's rescue when a host fails a step: ``{stage, task, message}``.
``fleet_report_reached_end``
    whether the host was still in the run at the report (the action of fleet_report_info sets it
    from the report play's hosts).
``step_stopped``
    set by the step guard on hosts the run stopped taking because too many hosts failed.
``gateway_state``
    set on each box by the gateway role: ``{url, gateway, state, detail}``, the box's state at the
    site gateway (up, down, draining, drained, held out...).

A host with neither failed nowhere we saw and never reached the end: it was unreachable (Ansible
drops unreachable hosts from later plays without a rescue). Pure functions: no Ansible imports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem, severity
from ansible_collections.glm53.tensorfold.plugins.module_utils import fleet_bench

# The facts the report reads (the interface table of docs/development.md, plus the step guard's);
# fleet_report_reached_end comes from the report's action, not from the hosts.
FACTS = (
    "gpu_host_checks_result",
    "tensorfold_image_ref",
    "tensorfold_image_tag",
    "weights_fetch_model_revision",
    "rank_container_result",
    "smoke_test_result",
    "step_failure",
    "step_stopped",
    "gateway_state",
    "gateway_healed",
    "fleet_bench_result",
    "gpu_host_checks_gpus",
)

STATUSES = ("live", "failed", "unreachable", "stopped", "planned", "skipped")
LABELS = {
    "live": "LIVE",
    "failed": "failed",
    "unreachable": "unreachable",
    "stopped": "stopped",
    "planned": "planned (check mode)",
    "skipped": "skipped",
}
_CODE = re.compile(r"\[([EW]_[A-Z0-9_]+)\]")

TODO_UNREACHABLE = ("Ansible could not reach the host: check SSH access (ansible HOST -m ansible.builtin.ping) "
                    "and run again with --limit HOST.")
TODO_SKIPPED = ("Not smoke-tested in this run (tags or limits left it out): run site.yml without --tags to check it end to end "
                "(and serve it, if it is down).")
TODO_STOPPED = "Stopped on purpose: run site.yml (or --tags start) to serve again."
TODO_STOPPED_RUN = "Fix the failed hosts (see their lines), then run again."
TODO_NOT_DEPLOYED = "Never deployed: run site.yml to deploy it."
TODO_UNCODED = "Read the failed task's error in the run's output, fix it and run again with --limit HOST."


def _as_list(value):
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _text(item):
    """A problem's message, whether it came as a record (dict) or as plain text."""
    if isinstance(item, dict):
        return str(item.get("message") or item.get("msg") or item.get("code") or "")
    return str(item)


def _record_from_text(text, host):
    match = _CODE.search(text)
    code = match.group(1) if match else None
    return {"code": code, "severity": severity(code) if code else "error", "host": host, "message": text}


def _records(items, host):
    """Normalise problems given as records or as coded text into records."""
    out = []
    for item in _as_list(items):
        if isinstance(item, dict) and item.get("code"):
            entry = dict(item)
            entry.setdefault("severity", severity(entry["code"]))
            entry.setdefault("host", host)
            entry["message"] = _text(item)
            out.append(entry)
        elif _text(item):
            out.append(_record_from_text(_text(item), host))
    return out


def _failure_records(failure, host):
    """Records from a rescued failure: one per coded message, or one uncoded record."""
    message = failure.get("message")
    lines = [_text(line) for line in _as_list(message)]
    records = []
    for line in lines:
        for part in re.split(r"(?=\[[EW]_[A-Z0-9_]+\])", line):
            part = part.strip()
            if part and _CODE.match(part):
                records.append(_record_from_text(part, host))
    if not records:
        text = " ".join(line for line in lines if line) or "no message"
        records.append({"code": None, "severity": "error", "host": host, "message": text})
    for entry in records:
        entry["stage"] = failure.get("stage")
        entry["task"] = failure.get("task")
    return records


def _unique(records):
    seen, out = set(), []
    for entry in records:
        key = entry["message"]
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def host_line(host, facts, plan=False):
    """One host's line of the report from its facts (a dict; missing facts are fine).

    In a plan run (``plan``), a host that came through without failing is ``planned``.
    """
    facts = facts or {}
    checks = facts.get("gpu_host_checks_result") or {}
    ranks = facts.get("rank_container_result") or {}
    smoke = facts.get("smoke_test_result") or {}
    failure = facts.get("step_failure") or {}
    # heal.yml's outcome for the box: healthy (its 1-token completion answered), stopped (on purpose),
    # restarted or not_deployed (the restart's and smoke test's own results tell those).
    healed = facts.get("gateway_healed") if isinstance(facts.get("gateway_healed"), dict) else {}

    problems = []
    problems += _records(checks.get("problems"), host)
    problems += _records(ranks.get("problems"), host)
    problems += _records(ranks.get("warnings"), host)
    problems += _records(smoke.get("problems"), host)
    stage = None
    if failure:
        problems += _failure_records(failure, host)
        stage = failure.get("stage")
    problems = _unique(problems)
    errors = [p for p in problems if p["severity"] == "error"]
    warnings = [p for p in problems if p["severity"] != "error"]

    failed = bool(failure) or checks.get("status") == "fail" or ranks.get("status") == "failed" \
        or smoke.get("status") == "failed"
    if failed and errors and all(e.get("code") == "E_UNREACHABLE" for e in errors):
        status = "unreachable"  # the step guard found it unreachable (step/tasks/reach.yml)
    elif failed:
        status = "failed"
    elif smoke.get("status") == "live" or (facts.get("fleet_bench_result") or {}).get("status") == "measured" \
            or healed.get("status") == "healthy":
        status = "live"
    elif facts.get("step_stopped"):
        status = "skipped"
    elif not facts.get("fleet_report_reached_end"):
        status = "unreachable"
    elif ranks.get("status") == "stopped" or healed.get("status") == "stopped":
        status = "stopped"
    elif ranks.get("status") == "not_deployed":
        status = "skipped"  # a restart or heal, in check mode too: nothing there to plan
    elif smoke.get("status") == "planned" or plan:
        status = "planned"
    else:
        status = "skipped"

    codes = []
    for entry in errors if status == "failed" else []:
        if entry.get("code") and entry["code"] not in codes:
            codes.append(entry["code"])

    if status == "failed":
        coded = [e for e in errors if e.get("code")]
        if coded:
            todo = " ".join(e["message"] for e in coded)
        else:
            todo = "%s %s" % (errors[0]["message"] if errors else "", TODO_UNCODED.replace("HOST", host))
            todo = todo.strip()
        if stage is None:
            stage = ("gpu_host_checks" if checks.get("status") == "fail" else
                     "smoke_test" if smoke.get("status") == "failed" else "rank_container")
    elif status == "unreachable":
        todo = TODO_UNREACHABLE.replace("HOST", host)
    elif status == "stopped":
        todo = TODO_STOPPED
    elif status == "skipped" and facts.get("step_stopped"):
        todo = "%s %s" % (str(facts["step_stopped"]).strip(), TODO_STOPPED_RUN)
    elif status == "skipped" and ranks.get("status") == "not_deployed":
        todo = TODO_NOT_DEPLOYED
    elif status == "skipped":
        todo = TODO_SKIPPED
    else:
        todo = ""

    gateway = facts.get("gateway_state") or {}
    line = {
        "host": host,
        "status": status,
        "label": LABELS[status] + (" (%s)" % ", ".join(codes) if codes else ""),
        "codes": codes,
        "stage": stage,
        "endpoint": smoke.get("endpoint") or healed.get("endpoint") or ranks.get("endpoint") or "",
        "context": ranks.get("context"),
        "streams": ranks.get("streams"),
        "image_ref": facts.get("tensorfold_image_ref") or "",
        "image_tag": facts.get("tensorfold_image_tag") or "",
        "revision": facts.get("weights_fetch_model_revision") or "",
        "warnings": [w["message"] for w in warnings],
        "errors": [e["message"] for e in errors] if status == "failed" else [],
        "todo": todo,
    }
    if isinstance(gateway, dict) and gateway.get("state"):
        line["gateway"] = {"url": gateway.get("url") or "", "state": gateway["state"],
                           "detail": gateway.get("detail") or ""}
    return line


def _driver(facts):
    gpus = (facts or {}).get("gpu_host_checks_gpus") or []
    return (gpus[0] or {}).get("driver_version") if gpus and isinstance(gpus[0], dict) else None


def add_bench(lines, hostfacts, slow_ratio=0.85):
    """The bench's figures per host (when the bench ran): measured figures, the recipe's, the
    ratio to the fleet's median, and W_SLOW with the likely causes for a box below slow_ratio.
    Returns the fleet-wide part (median, threshold) or None."""
    results = dict((h, (f or {}).get("fleet_bench_result")) for h, f in hostfacts.items())
    results = dict((h, r) for h, r in results.items() if r)
    if not results:
        return None
    compared = fleet_bench.compare(results, slow_ratio)
    drivers = [d for d in (_driver(f) for f in hostfacts.values()) if d]
    for line in lines:
        result = results.get(line["host"])
        if not result:
            continue
        rank = compared["hosts"].get(line["host"]) or {}
        line["bench"] = {"kind": result.get("kind", "box"), "status": result.get("status"),
                         "url": result.get("url"), "cases": result.get("cases") or {},
                         "exports": result.get("exports") or {},
                         "ratio": rank.get("ratio"), "slow": bool(rank.get("slow"))}
        if rank.get("slow"):
            seen = list(line["codes"]) + [_CODE.search(w).group(1) for w in line["warnings"] if _CODE.search(w)]
            causes = fleet_bench.likely_causes(seen, _driver(hostfacts.get(line["host"])), drivers)
            line["bench"]["causes"] = causes
            what = ("decode with one stream measured %.1f tok/s, %.2f of the fleet's median %.1f (threshold %.2f); "
                    "likely causes: %s" % (rank["value"], rank["ratio"], compared["median"], compared["threshold"],
                                           "; ".join(causes) if causes else "none the host checks saw"))
            line["warnings"].append(problem("W_SLOW", line["host"], what))
    compared["recipe"] = fleet_bench.RECIPE
    return compared


def build_report(hostfacts, generated_at="", plan=False, slow_ratio=0.85):
    """The report as a dict: ``hostfacts`` maps each inventory host to its facts (or None)."""
    lines = [host_line(host, hostfacts[host], plan) for host in sorted(hostfacts)]
    bench = add_bench(lines, hostfacts, slow_ratio)
    summary = dict((status, 0) for status in STATUSES)
    for line in lines:
        summary[line["status"]] += 1
    summary["hosts"] = len(lines)
    for line in lines:
        line["warning_codes"] = _warning_codes(line["warnings"])
    report = {"generated_at": generated_at, "plan": bool(plan), "summary": summary, "hosts": lines}
    report["summary_text"] = summary_line(report)
    urls = sorted(set(line["gateway"]["url"] for line in lines if line.get("gateway") and line["gateway"]["url"]))
    if urls:
        report["gateways"] = urls
    report["gateway_lines"] = gateway_lines(report)
    if bench:
        report["bench"] = bench
        report["bench_lines"] = fleet_bench.render_markdown(report)
    return report


def gateway_lines(report):
    """The report's lines about the site gateway: its URL and the boxes not up there."""
    if not report.get("gateways"):
        return []
    boxes = [line for line in report["hosts"] if line.get("gateway")]
    up = [line["host"] for line in boxes if line["gateway"]["state"] == "up"]
    out = ["Gateway: %s (%d of %d box%s up)." % (", ".join(report["gateways"]), len(up), len(boxes),
                                                 "" if len(boxes) == 1 else "es")]
    for line in boxes:
        if line["gateway"]["state"] != "up":
            detail = line["gateway"]["detail"]
            detail = " (%s)" % detail if detail else ""
            out.append("- **%s** at the gateway: %s%s" % (line["host"], line["gateway"]["state"], detail))
    return out


def _warning_codes(warnings):
    """The codes of a host's warnings, each once, in order (``warning`` for an uncoded one)."""
    codes = []
    for text in warnings:
        match = _CODE.search(text)
        code = match.group(1) if match else "warning"
        if code not in codes:
            codes.append(code)
    return codes


def summary_line(report):
    s = report["summary"]
    parts = ["%d LIVE" % s["live"], "%d failed" % s["failed"], "%d unreachable" % s["unreachable"]]
    for status in ("stopped", "planned", "skipped"):
        if s[status]:
            parts.append("%d %s" % (s[status], LABELS[status]))
    return "%d host%s: %s" % (s["hosts"], "" if s["hosts"] == 1 else "s", ", ".join(parts))
