# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The site gateway (HAProxy in front of the fleet): pure decisions, no I/O.

* which boxes the gateway serves from (``backend_plan``): the boxes of the inventory that came
  through this run, held out with the reason when they failed or never went LIVE;
* HAProxy's ``show stat`` CSV read into one dict per server (``parse_show_stat``) and its status
  text read as the state the fleet report prints (``server_state``);
* whether a drain has finished and whether a server put back has passed a check since
  (``drain_done``, ``ready_outcome``);
* what would make HAProxy refuse the configuration (``settings_problems``, read in pre-flight) or
  serve a box by mistake (``shared_addresses``);
* HAProxy's ``show servers state`` read against the plan: the rows of the saved state a reload may
  load (``state_for_plan``), and whether the running process serves the plan's servers
  (``plan_differences``).

The runtime API's words (``set server B/S state drain|maint|ready``, ``show stat``) are HAProxy's
own (its management guide); the module ``gateway_server`` sends them over the admin socket.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import ipaddress
import re
import time

_NAME = re.compile(r"[^A-Za-z0-9_.:-]")

# What the fleet report prints for each state of a server at the gateway.
# "unresolved": in maintenance because its address does not resolve (a DNS problem, not the box).
STATES = ("up", "down", "draining", "drained", "checking", "unresolved", "held out", "unknown")


def server_name(host):
    """HAProxy's name for a box's server line: the inventory name, with characters HAProxy does
    not allow in a name replaced by '_'."""
    return _NAME.sub("_", str(host))


# The facts of a box the gateway's plan reads (its inventory address and port, the failure the
# step guard recorded this run, the smoke test's verdict).
BOX_FACTS = ("ansible_host", "tensorfold_port", "step_failure", "smoke_test_result")


def box_from_facts(host, facts, default_port=8020):
    """One box of ``backend_plan`` from the facts (``BOX_FACTS``) a host published."""
    failure = facts.get("step_failure") or {}
    smoke = facts.get("smoke_test_result") or {}
    return {
        "host": host,
        "address": facts.get("ansible_host") or host,
        "port": facts.get("tensorfold_port") or default_port,
        "failure_stage": failure.get("stage") if isinstance(failure, dict) else None,
        "smoke_status": smoke.get("status") if isinstance(smoke, dict) else None,
    }


def backend_plan(boxes):
    """Split the fleet's boxes into the servers the gateway forwards to and those held out.

    ``boxes``: one dict per box of the inventory, ``{host, address, port, failure_stage,
    smoke_status, in_run}``. ``failure_stage`` is set when the box failed a step this run;
    ``smoke_status`` is the smoke test's verdict this run (``live``, ``failed``, ``planned``) or
    empty when the smoke test did not run for it (``--tags gateway``, ``--limit``), in which case
    the box stays and the gateway's active check (a real completion) judges it.

    Returns ``{"servers": [{host, name, address, port}], "held_out": [{host, name, reason}],
    "names": {host: name}}``, the lists sorted by host (``names``: every box's server name).
    """
    servers, held = [], []
    for box in sorted(boxes, key=lambda b: str(b.get("host"))):
        host = str(box.get("host"))
        name = server_name(host)
        stage = box.get("failure_stage")
        smoke = box.get("smoke_status") or ""
        if stage:
            held.append({"host": host, "name": name, "reason": "failed in %s this run" % stage})
        elif smoke and smoke != "live" and smoke != "planned":
            held.append({"host": host, "name": name, "reason": "not LIVE (smoke test: %s)" % smoke})
        elif not box.get("address"):
            held.append({"host": host, "name": name, "reason": "no address known"})
        else:
            servers.append({"host": host, "name": name, "address": str(box["address"]),
                            "port": int(box.get("port") or 8020)})
    return {"servers": servers, "held_out": held,
            "names": dict((entry["host"], entry["name"]) for entry in servers + held)}


def name_clashes(hosts):
    """Inventory hosts whose server names come out the same (``gpu box@03`` and ``gpu_box_03``):
    HAProxy refuses two servers of one name, and a drain by name would hit the other box. Returns
    text for each clash (an E_SETTINGS problem), empty when none."""
    by_name = {}
    for host in hosts:
        by_name.setdefault(server_name(host), []).append(str(host))
    return ["inventory hosts %s become one server name at the gateway (%s)" % (
        " and ".join("'%s'" % h for h in sorted(clashing)), name)
        for name, clashing in sorted(by_name.items()) if len(clashing) > 1]


def shared_addresses(plan):
    """Servers that point at the same address and port: draining one leaves the other sending
    requests to that box. Returns a warning's text for each, empty when none."""
    by_target = {}
    for server in plan["servers"]:
        key = (server["address"].strip("[]").lower(), server["port"])
        by_target.setdefault(key, []).append(server["host"])
    return ["hosts %s both point at %s port %d, so draining one leaves the other sending requests to that box" % (
        " and ".join(sorted(hosts)), address, port)
        for (address, port), hosts in sorted(by_target.items()) if len(hosts) > 1]


_ANY = ("", "*", "0.0.0.0", "::")


def binds_overlap(one, other):
    """Two listening addresses share a port's space (either is a wildcard, or they are the same)."""
    one, other = (str(x).strip().strip("[]").lower() for x in (one, other))
    return one in _ANY or other in _ANY or one == other


def listen_clashes(gateway_host, boxes, listens, engine_bind):
    """On a gateway host that is also one of the boxes (its engine runs with --network host), the
    gateway's ports (``listens``: ``[{what, bind, port}]``) must not be the engine's. Returns text
    for each clash, empty when none."""
    engine = [b for b in boxes if str(b.get("host")) == str(gateway_host)]
    if not engine:
        return []
    port = int(engine[0].get("port") or 0)
    return ["%s %d (on %s) is also the port of the engine on this host (tensorfold_port %d on %s, which runs "
            "with --network host as a box of the fleet)"
            % (entry["what"], int(entry["port"]), entry["bind"] or "*", port, engine_bind)
            for entry in listens if int(entry["port"]) == port and binds_overlap(entry["bind"], engine_bind)]


def parse_show_stat(text):
    """HAProxy's ``show stat`` CSV as a list of dicts (servers only, not FRONTEND/BACKEND rows):
    ``{backend, server, status, scur, qcur, check_status, check_running, check_code, check_desc,
    last_change, check_fall}``. HAProxy marks a check in progress with ``* `` before its status
    (``* L7OK``): ``check_status`` is without it, ``check_running`` says it was there."""
    text = (text or "").lstrip()
    if text.startswith("#"):
        text = text[1:].lstrip()
    rows = []
    for row in csv.DictReader(text.splitlines()):
        server = row.get("svname") or ""
        if not server or server in ("FRONTEND", "BACKEND"):
            continue
        check_status = (row.get("check_status") or "").strip()
        rows.append({
            "backend": row.get("pxname") or "",
            "server": server,
            "status": (row.get("status") or "").strip(),
            "scur": _int(row.get("scur")),
            "qcur": _int(row.get("qcur")),
            "check_status": check_status.lstrip("* ").strip(),
            "check_running": check_status.startswith("*"),
            "check_code": (row.get("check_code") or "").strip(),
            "check_desc": (row.get("check_desc") or "").strip(),
            "last_change": _int(row.get("lastchg")),
            "check_fall": _int(row.get("check_fall")),
        })
    return rows


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def find(rows, backend, server):
    for row in rows:
        if row["backend"] == backend and row["server"] == server:
            return row
    return None


def server_state(row):
    """The state the report prints for one server row (or ``unknown`` for none).

    HAProxy's status reads ``UP``, ``DOWN``, ``MAINT`` (also ``MAINT (via ...)``, and ``MAINT
    (resolution)`` when its address does not resolve), ``DRAIN``, ``NOLB``, ``DOWN (agent)``,
    ``UP 1/2`` / ``DOWN 1/2`` while a check moves it, and ``no check`` without checks.
    """
    if not row:
        return "unknown"
    status = row["status"].upper()
    if status.startswith("MAINT (RESOLUTION)"):
        # A DNS problem at the gateway: restarting the box would not help.
        return "unresolved"
    if status.startswith("MAINT"):
        return "drained"
    if status.startswith("DRAIN") or status.startswith("NOLB"):
        return "draining"
    # "UP 1/2": serving, its health not yet full (just back from maintenance, or a check failed).
    # "no check": serving with checks off (nothing proves it works; ready_outcome says so).
    if status.startswith("UP") or status == "NO CHECK":
        return "up"
    if status == "DOWN" or status.startswith("DOWN (AGENT)"):
        return "down"
    # "DOWN 1/2": not serving yet, checks passing on its way up.
    if status.startswith("DOWN "):
        return "checking"
    return "unknown"


def is_up(row):
    """The gateway sends the server requests (the report's ``up``: UP, UP x/y, no check)."""
    return server_state(row) == "up"


def ready_outcome(row):
    """Where a server put back (``set server ... state ready``) stands: ``passed``, ``waiting``,
    ``no check`` (checks off: nothing can prove it) or ``gone`` (not in the configuration).

    Leaving maintenance HAProxy sets the server's health to ``rise``, the lowest UP (``UP 1/2``)
    below the full ``rise + fall - 1``; only a check that passed after that brings it to a plain
    ``UP``. So a plain ``UP`` read after the command proves a passed check, as long as
    ``fall`` >= 2 (with ``fall`` 1 the lowest UP is already full: pre-flight refuses it, settings_problems).
    """
    if not row:
        return "gone"
    status = row["status"].upper()
    if status == "NO CHECK":
        return "no check"
    if status == "UP" and not row.get("check_running") and not row["check_status"].upper().startswith("INI"):
        return "passed"
    return "waiting"


def drain_done(row):
    """A drained server has no request in flight left (and none queued for it)."""
    return bool(row) and row["scur"] == 0 and row["qcur"] == 0


def drain_waits(row):
    """Whether a drain waits for the server's requests in flight: not when the gateway's check
    has it down (HAProxy's ``DOWN``, also after ``set server ... state drain``). A down server
    gets no new request, and the requests still open on a wedged engine will not finish, so the
    wait would only run out ``drain_timeout``."""
    return bool(row) and server_state(row) != "down"


def settled(rows, backend):
    """True when no server of the backend is between states (a check moving it, or its first
    check not yet done)."""
    for row in rows:
        if row["backend"] != backend:
            continue
        if "/" in row["status"] or row["check_status"].upper().startswith("INI"):
            return False
    return True


def check_summary(row):
    """What the gateway's last check of a server saw, for messages."""
    if not row:
        return "not in the gateway's configuration"
    parts = [row["status"]]
    if row["check_status"]:
        seen = row["check_status"]
        if row["check_code"]:
            seen += " %s" % row["check_code"]
        if row["check_desc"]:
            seen += " (%s)" % row["check_desc"]
        parts.append("last check %s" % seen)
    if row["scur"]:
        parts.append("%d request%s in flight" % (row["scur"], "" if row["scur"] == 1 else "s"))
    return ", ".join(parts)


def check_fall_problem(fall):
    """``fall`` 1 puts a box back at full health before any check, so a rolling restart could not
    tell that the gateway's check passed (``ready_outcome``). Text for E_SETTINGS, or None."""
    if int(fall) >= 2:
        return None
    return ("gateway_check_fall is %s: a box put back would read UP before any check ran, so a rolling restart "
            "could not wait for a passed check" % fall)


def check_timing_problem(interval, timeout, fastinter_ms, fall):
    """A wedged engine must leave rotation within two check intervals: ``fall`` checks that each
    time out, with the fast re-checks between them, must fit in one interval. Returns what is
    wrong (text for an E_SETTINGS problem), or None."""
    worst = fall * float(timeout) + (fall - 1) * float(fastinter_ms) / 1000.0
    if worst <= float(interval):
        return None
    return ("gateway_check_fall x gateway_check_timeout plus the fast re-checks (%s x %s s + %s x %s ms) exceeds "
            "gateway_check_interval (%s s), so a wedged engine could stay in rotation longer than two intervals"
            % (fall, timeout, fall - 1, fastinter_ms, interval))


def _listens(settings):
    """The gateway's listening ports as listen_clashes reads them: the clients' front, and the
    metrics port unless it is off (0)."""
    listens = [{"what": "gateway_port", "bind": settings.get("gateway_bind"), "port": settings["gateway_port"]}]
    if settings["gateway_stats_port"] > 0:
        listens.append({"what": "gateway_stats_port", "bind": settings.get("gateway_stats_bind"),
                        "port": settings["gateway_stats_port"]})
    return listens


def settings_problems(host, settings, groups):
    """What would make a gateway host's converge fail, from the settings and the inventory alone:
    checked in pre-flight (settings.check_settings) so that no box is touched first. ``settings``:
    the gateway's and the shared settings, defaults filled in, the integers already read (None
    where a value is not a whole number: its type check reports it); ``groups``: the inventory's.
    Returns ``(setting, what, todo)`` for each problem, empty when none."""
    found = []
    fall = settings.get("gateway_check_fall")
    timing = [settings.get(name) for name in ("gateway_check_interval", "gateway_check_timeout",
                                              "gateway_check_fastinter_ms")]
    if fall is not None and check_fall_problem(fall):
        found.append(("gateway_check_fall", check_fall_problem(fall), "Set gateway_check_fall to 2 or more."))
    elif fall is not None and None not in timing:
        wrong = check_timing_problem(timing[0], timing[1], timing[2], fall)
        if wrong:
            found.append(("gateway_check_timeout", wrong, "Lower the timeout or raise the interval."))
    fleet_group = settings.get("gateway_fleet_group")
    fleet = groups.get(fleet_group) or []
    clashes = name_clashes(fleet)
    if clashes:
        found.append(("gateway_fleet_group", "; ".join(clashes) + " (HAProxy refuses two servers of one name)",
                      "Rename one of each pair in the inventory."))
    ports = [settings.get(name) for name in ("gateway_port", "gateway_stats_port", "tensorfold_port")]
    if host in fleet and None not in ports:
        listens = listen_clashes(host, [{"host": host, "port": settings["tensorfold_port"]}], _listens(settings),
                                 settings.get("tensorfold_host") or "0.0.0.0")
        if listens:
            found.append(("gateway_port", "; ".join(listens),
                          "Set gateway_port (and gateway_stats_port) for this host to ports the engine does not use, "
                          "or bind them to another address (gateway_bind)."))
    return found


def parse_servers_state(text):
    """HAProxy's ``show servers state`` (format version 1: a ``1`` line, a ``# be_id be_name ...``
    header naming the fields, one line of space-separated fields per server) as a list of dicts
    keyed by the header's names, each with its ``line`` as HAProxy wrote it. Any other answer
    (``Can't find backend.``) reads as no server."""
    lines = (text or "").splitlines()
    if not lines or lines[0].strip() != "1":
        return []
    fields, rows = [], []
    for line in lines[1:]:
        if line.startswith("#"):
            fields = line[1:].split()
        elif line.strip() and fields:
            rows.append(dict(zip(fields, line.split()), line=line))
    return rows


def _ip(text):
    try:
        return ipaddress.ip_address(u"%s" % str(text).strip().strip("[]"))
    except ValueError:
        return None


def _target_differences(row, server):
    """How a ``show servers state`` row differs from the plan's server of the same name: its
    address (an IP compared as an IP; a DNS name with the row's ``srv_fqdn``, the name configured,
    not the address it resolved to) and its port. Empty when none."""
    wrong = []
    planned = str(server["address"]).strip()
    running = row.get("srv_fqdn") or "-"
    if running == "-":
        running = row.get("srv_addr") or "-"
    if _ip(planned) is not None:
        same = _ip(running) == _ip(planned)
    else:
        same = running.rstrip(".").lower() == planned.rstrip(".").lower()
    if not same:
        wrong.append("address %s, not %s" % (running, planned))
    if str(row.get("srv_port")) != str(int(server["port"])):
        wrong.append("port %s, not %d" % (row.get("srv_port"), int(server["port"])))
    return wrong


def state_for_plan(text, backend, servers):
    """The saved server state (``show servers state``'s answer) a reload onto the plan may load.

    HAProxy applies a saved row to the server of the same backend and name as it is, address
    (with ``init-addr last``) and port included, over the configuration's (src/server_state.c).
    So only the rows of servers the plan keeps at the same address and port stay (their admin
    state and health are what the file keeps across a reload: a drained box stays drained); the
    others are dropped and start from the configuration. Rows of other backends stay.

    Returns ``(text, dropped)``: the file's text and the names of the servers dropped."""
    lines = (text or "").splitlines()
    planned = dict((server["name"], server) for server in servers)
    rows = dict((row["line"], row) for row in parse_servers_state(text))
    kept, dropped = [], []
    for line in lines:
        if not line.strip():
            continue
        row = rows.get(line)
        if row is not None and row.get("be_name") == backend:
            server = planned.get(row.get("srv_name"))
            if server is None or _target_differences(row, server):
                dropped.append(row.get("srv_name"))
                continue
        kept.append(line)
    return "".join(line + "\n" for line in kept), dropped


def started_before(info_text, mtimes, now=None):
    """Whether the HAProxy process that answers ``show info`` (``info_text``) started before the
    newest of ``mtimes`` (the files it reads at start, as seconds): then it runs an older
    configuration (a reload whose new process failed). The start is ``Start_time_sec`` where the
    answer has it, else ``now`` less ``Uptime_sec`` (the older field). Both are whole seconds, so a
    process started in the second the file was written counts as started after it. False when
    the answer has neither or there is no file."""
    fields = {}
    for line in (info_text or "").splitlines():
        name, value = (line.split(":", 1) + [""])[:2]
        if value.strip().isdigit():
            fields[name.strip()] = int(value.strip())
    if not mtimes:
        return False
    if "Start_time_sec" in fields:
        started = fields["Start_time_sec"]
    elif "Uptime_sec" in fields:
        started = int(time.time() if now is None else now) - fields["Uptime_sec"]
    else:
        return False
    return started < int(max(mtimes))


def plan_differences(rows, backend, servers):
    """How the servers HAProxy runs (``parse_servers_state`` rows) differ from the plan's: a
    server missing, one the plan does not have, or one at another address or port. Text for each,
    empty when HAProxy serves the plan."""
    running = dict((row.get("srv_name"), row) for row in rows if row.get("be_name") == backend)
    wrong = []
    for server in sorted(servers, key=lambda s: s["name"]):
        row = running.pop(server["name"], None)
        if row is None:
            wrong.append("%s missing" % server["name"])
        else:
            wrong.extend("%s at %s" % (server["name"], text) for text in _target_differences(row, server))
    wrong.extend("%s not in the plan" % name for name in sorted(running))
    return wrong
