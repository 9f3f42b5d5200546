# -*- coding: utf-8 -*-
"""The gateway's decisions: which boxes it serves from, HAProxy's stats read as box states."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import (
    backend_plan, binds_overlap, box_from_facts, check_fall_problem, check_summary, check_timing_problem, drain_done,
    drain_waits,
    find, is_up, listen_clashes, name_clashes, parse_servers_state, parse_show_stat, plan_differences, ready_outcome,
    server_name, server_state, settled, shared_addresses, started_before, state_for_plan)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def show_stat():
    # `show stat` of HAProxy 2.6.12 (Debian 12) over three engine stand-ins: one up, one down after
    # its completion check timed out (the stand-in wedged), one put in maintenance (drained).
    with open(os.path.join(FIXTURES, "haproxy-2.6-show-stat.csv")) as handle:
        return handle.read()


def box(host, **facts):
    entry = {"host": host, "address": host + ".example", "port": 8020}
    entry.update(facts)
    return entry


def test_boxes_that_came_through_are_servers_and_the_others_are_held_out_with_why():
    plan = backend_plan([
        box("gpu-box-03", smoke_status="live"),
        box("gpu-box-01", smoke_status="live"),
        box("gpu-box-02", failure_stage="gpu_host_checks"),
        box("gpu-box-04", smoke_status="failed"),
        box("gpu-box-05"),  # not smoke-tested this run (--tags gateway): the check judges it
    ])
    assert [s["host"] for s in plan["servers"]] == ["gpu-box-01", "gpu-box-03", "gpu-box-05"]
    assert plan["servers"][0] == {"host": "gpu-box-01", "name": "gpu-box-01", "address": "gpu-box-01.example",
                                  "port": 8020}
    assert plan["held_out"] == [
        {"host": "gpu-box-02", "name": "gpu-box-02", "reason": "failed in gpu_host_checks this run"},
        {"host": "gpu-box-04", "name": "gpu-box-04", "reason": "not LIVE (smoke test: failed)"},
    ]


def test_a_failure_this_run_holds_a_box_out_even_after_an_earlier_live():
    plan = backend_plan([box("a", smoke_status="live", failure_stage="restart")])
    assert plan["servers"] == [] and plan["held_out"][0]["reason"] == "failed in restart this run"


def test_server_names_keep_what_haproxy_allows():
    assert server_name("gpu-box-01.dc1:2") == "gpu-box-01.dc1:2"
    assert server_name("box one/α") == "box_one__"


def test_show_stat_is_read_per_server():
    rows = parse_show_stat(show_stat())
    assert sorted(r["server"] for r in rows) == ["gpu-box-01", "gpu-box-02", "gpu-box-03"]
    up, wedged, drained = (find(rows, "engines", "gpu-box-0%d" % n) for n in (1, 2, 3))
    assert server_state(up) == "up" and is_up(up)
    assert server_state(wedged) == "down" and not is_up(wedged)
    assert server_state(drained) == "drained"
    assert "L7TOUT" in check_summary(wedged)
    assert find(rows, "engines", "gpu-box-09") is None
    assert check_summary(None) == "not in the gateway's configuration"


def test_states_between_checks_and_drains():
    row = {"status": "UP 1/2", "scur": 0, "qcur": 0, "check_status": "L7OK"}
    # HAProxy shows "UP 1/2" just after a server leaves maintenance: it already gets requests.
    assert server_state(row) == "up" and is_up(row)
    assert server_state(dict(row, status="DOWN 1/2")) == "checking" and not is_up(dict(row, status="DOWN 1/2"))
    assert server_state(dict(row, status="DRAIN")) == "draining"
    assert server_state(dict(row, status="MAINT (via engines/other)")) == "drained"
    assert server_state(None) == "unknown"
    assert drain_done(dict(row, scur=0, qcur=0)) and not drain_done(dict(row, scur=1))
    assert not settled([dict(row, backend="engines")], "engines")
    assert settled([dict(row, backend="engines", status="UP")], "engines")
    assert not settled([dict(row, backend="engines", status="UP", check_status="INI")], "engines")


def test_a_box_is_read_from_its_inventory_address_port_failure_and_smoke_verdict():
    facts = {"ansible_host": "10.0.0.12", "tensorfold_port": 8030,
             "step_failure": {"stage": "weights_fetch", "task": "t", "message": "m"},
             "smoke_test_result": {"status": "failed"}}
    assert box_from_facts("gpu-box-02", facts) == {"host": "gpu-box-02", "address": "10.0.0.12", "port": 8030,
                                                   "failure_stage": "weights_fetch", "smoke_status": "failed"}
    plan = backend_plan([box_from_facts("gpu-box-02", facts)])
    assert plan["held_out"] == [{"host": "gpu-box-02", "name": "gpu-box-02", "reason": "failed in weights_fetch this run"}]


def test_a_box_without_facts_is_served_at_its_name_and_the_default_port():
    assert box_from_facts("gpu-box-01", {}, default_port=8020) == {
        "host": "gpu-box-01", "address": "gpu-box-01", "port": 8020, "failure_stage": None, "smoke_status": None}


def test_the_check_timing_takes_a_wedged_engine_out_within_two_intervals():
    # The defaults: 2 x 2 s + 1 x 500 ms = 4.5 s fits in 5 s.
    assert check_timing_problem(5, 2, 500, 2) is None
    assert check_timing_problem(5, 2.5, 0, 2) is None  # exactly one interval
    wrong = check_timing_problem(5, 3, 500, 2)
    assert wrong and "(2 x 3 s + 1 x 500 ms) exceeds gateway_check_interval (5 s)" in wrong
    assert check_timing_problem(5, 2, 1500, 2)  # the fast re-checks count too


def test_a_box_put_back_is_ready_only_after_a_check_that_ran_since():
    # Leaving maintenance HAProxy reads "UP 1/2" at once (health set to rise, no check yet).
    row = {"status": "UP 1/2", "scur": 0, "qcur": 0, "check_status": "L7OK", "check_running": False}
    assert ready_outcome(row) == "waiting"
    assert ready_outcome(dict(row, status="UP")) == "passed"
    assert ready_outcome(dict(row, status="UP", check_status="INI")) == "waiting"
    assert ready_outcome(dict(row, status="DOWN", check_status="L7STS")) == "waiting"
    assert ready_outcome(dict(row, status="no check", check_status="")) == "no check"
    assert ready_outcome(None) == "gone"


def test_fall_1_is_refused_since_no_return_could_be_proven():
    assert check_fall_problem(2) is None
    assert "gateway_check_fall is 1" in check_fall_problem(1)


def test_statuses_read_as_what_they_mean():
    row = {"status": "no check", "scur": 0, "qcur": 0, "check_status": ""}
    assert server_state(row) == "up" and is_up(row)  # both agree: HAProxy sends it requests
    assert server_state(dict(row, status="MAINT (resolution)")) == "unresolved"
    assert server_state(dict(row, status="DOWN (agent)")) == "down"
    assert not is_up(dict(row, status="MAINT (resolution)"))


def test_a_running_check_loses_its_star():
    text = ("# pxname,svname,qcur,scur,status,check_status,check_fall\n"
            "engines,gpu-box-01,0,0,UP 1/2,* L7OK,2\n"
            "engines,gpu-box-02,0,0,DOWN,* INI,2\n")
    first, second = parse_show_stat(text)
    assert first["check_status"] == "L7OK" and first["check_running"] and first["check_fall"] == 2
    assert check_summary(first) == "UP 1/2, last check L7OK"
    assert second["check_status"] == "INI" and not settled([second], "engines")


def test_two_hosts_of_one_server_name_are_a_clash():
    assert name_clashes(["gpu box@03", "gpu_box_03", "gpu-box-01"]) == [
        "inventory hosts 'gpu box@03' and 'gpu_box_03' become one server name at the gateway (gpu_box_03)"]
    assert name_clashes(["a.b", "a@b", "a_b"]) == ["inventory hosts 'a@b' and 'a_b' become one server name at the gateway (a_b)"]
    assert name_clashes(["gpu-box-01"]) == []


def test_two_hosts_at_one_address_and_port_are_named():
    plan = backend_plan([box("a", address="10.0.0.1"), box("b", address="10.0.0.1"), box("c", address="10.0.0.1", port=8030)])
    assert shared_addresses(plan) == ["hosts a and b both point at 10.0.0.1 port 8020, so draining one leaves the other "
                                      "sending requests to that box"]


def test_a_gateway_that_is_also_a_box_must_not_take_the_engine_port():
    boxes = [box("gw", port=8020), box("gpu-box-01")]
    listens = [{"what": "gateway_port", "bind": "*", "port": 8020}, {"what": "gateway_stats_port", "bind": "*", "port": 8404}]
    wrong = listen_clashes("gw", boxes, listens, "0.0.0.0")
    assert len(wrong) == 1 and wrong[0].startswith("gateway_port 8020 (on *) is also the port of the engine")
    assert listen_clashes("gateway-01", boxes, listens, "0.0.0.0") == []  # not a box
    assert listen_clashes("gw", boxes, [dict(listens[0], bind="10.0.0.5")], "127.0.0.1") == []
    assert binds_overlap("::", "10.0.0.5") and binds_overlap("10.0.0.5", "10.0.0.5") and not binds_overlap("a", "b")


def show_servers_state():
    # `show servers state engines` of HAProxy 2.6.12 (Debian 12): gpu-box-01 127.0.0.1:18021,
    # gpu-box-02 localhost:18022 (a DNS name), gpu-box-03 [::1]:18023 in maintenance.
    with open(os.path.join(FIXTURES, "haproxy-2.6-show-servers-state.txt")) as handle:
        return handle.read()


PLANNED = [{"host": "gpu-box-01", "name": "gpu-box-01", "address": "127.0.0.1", "port": 18021},
           {"host": "gpu-box-02", "name": "gpu-box-02", "address": "localhost", "port": 18022},
           {"host": "gpu-box-03", "name": "gpu-box-03", "address": "::1", "port": 18023}]


def test_servers_state_reads_each_field_by_the_header_name():
    rows = parse_servers_state(show_servers_state())
    assert [(r["srv_name"], r["srv_addr"], r["srv_fqdn"], r["srv_port"], r["srv_admin_state"]) for r in rows] == [
        ("gpu-box-01", "127.0.0.1", "-", "18021", "0"), ("gpu-box-02", "127.0.0.1", "localhost", "18022", "0"),
        ("gpu-box-03", "::1", "-", "18023", "1")]
    assert parse_servers_state("Can't find backend.\n") == []


def test_the_saved_state_keeps_the_servers_the_plan_keeps_where_they_were():
    text, dropped = state_for_plan(show_servers_state(), "engines", PLANNED)
    assert text == show_servers_state().strip() + "\n" and dropped == []
    # "[::1]" and "::1", "LOCALHOST." and "localhost" are the same targets.
    same = [dict(PLANNED[1], address="LOCALHOST."), dict(PLANNED[2], address="[::1]")]
    assert state_for_plan(show_servers_state(), "engines", same)[1] == ["gpu-box-01"]


def test_a_server_moved_to_another_port_or_address_starts_from_the_configuration():
    # HAProxy applies a saved row's port (and, with init-addr last, its address) over the
    # configuration's: a moved box must not keep its old target across the reload.
    moved = [dict(PLANNED[0], address="127.0.0.2", port=18022), dict(PLANNED[1], address="gpu-box-02.example"),
             dict(PLANNED[2], port=18024)]
    text, dropped = state_for_plan(show_servers_state(), "engines", moved)
    assert dropped == ["gpu-box-01", "gpu-box-02", "gpu-box-03"]
    assert text.splitlines()[:2] == show_servers_state().splitlines()[:2] and len(text.splitlines()) == 2
    # Only the moved one goes; the drained box keeps its maintenance.
    text, dropped = state_for_plan(show_servers_state(), "engines", [PLANNED[0], PLANNED[2]] + moved[1:2])
    assert dropped == ["gpu-box-02"] and " gpu-box-03 ::1 0 1 " in text
    # A server the plan no longer has, and an IP configured where a name was, go too.
    assert state_for_plan(show_servers_state(), "engines", [dict(PLANNED[1], address="127.0.0.1")])[1] == [
        "gpu-box-01", "gpu-box-02", "gpu-box-03"]
    # Another backend's rows are not the plan's to judge.
    assert state_for_plan(show_servers_state(), "other", [])[1] == []


def test_plan_differences_name_what_the_running_haproxy_serves_otherwise():
    rows = parse_servers_state(show_servers_state())
    assert plan_differences(rows, "engines", PLANNED) == []
    wrong = plan_differences(rows, "engines", [dict(PLANNED[0], address="127.0.0.2", port=18022), PLANNED[1],
                                               dict(PLANNED[2], name="gpu-box-04")])
    assert wrong == ["gpu-box-01 at address 127.0.0.1, not 127.0.0.2", "gpu-box-01 at port 18021, not 18022",
                     "gpu-box-04 missing", "gpu-box-03 not in the plan"]
    assert plan_differences([], "engines", PLANNED[:1]) == ["gpu-box-01 missing"]


def test_a_drain_waits_for_a_server_unless_its_check_has_it_down():
    rows = dict((row["server"], row) for row in parse_show_stat(show_stat()))
    # gpu-box-01 up, gpu-box-02 DOWN (its completion check timed out), gpu-box-03 in maintenance.
    assert drain_waits(rows["gpu-box-01"]) and drain_waits(rows["gpu-box-03"])
    assert not drain_waits(rows["gpu-box-02"]) and not drain_waits(None)
    assert drain_waits(dict(rows["gpu-box-02"], status="DOWN 1/2"))  # its checks pass again: it may finish them


def test_a_process_that_started_before_its_files_were_written_runs_an_older_configuration():
    # show info of HAProxy 2.6.12 (its lines around the start time).
    info = "Name: HAProxy\nVersion: 2.6.12-1+deb12u4\nPid: 26975\nUptime_sec: 2\nStart_time_sec: 1796493549\n"
    assert started_before(info, [1796493550.2, 1700000000.0])
    # The same second counts as after (whole seconds): a reload right after the write passes.
    assert not started_before(info, [1796493549.9]) and not started_before(info, [1796493000.0])
    assert not started_before(info, []) and not started_before("Unknown command.\n", [1796493550.2])
    # An answer without Start_time_sec: the start is now less Uptime_sec.
    older = "Name: HAProxy\nPid: 26975\nUptime_sec: 2\n"
    assert started_before(older, [1796493550.2], now=1796493551.5)
    assert not started_before(older, [1796493549.9], now=1796493551.5)
