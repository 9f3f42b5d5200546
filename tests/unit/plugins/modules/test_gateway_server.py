# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""gateway_server against a runtime API that answers as HAProxy 2.6 does (show stat CSV, set server
state ... answering an empty line), with requests in flight that finish while a box drains."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket
import threading
import time

import pytest

from ansible_collections.glm53.tensorfold.plugins.modules import gateway_server

HEADER = ("# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,"
          "weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,"
          "rate_lim,rate_max,check_status,check_code,check_duration\n")


class FakeHAProxy(threading.Thread):
    """One server per name: status and requests in flight; a drain lets in-flight requests finish
    one per `finish_every` seconds. Leaving maintenance a server reads "UP 1/2" (HAProxy sets its
    health to rise) until its next check, `check_after` seconds later, passes ("UP") or fails
    ("DOWN", L7STS) as its "check" says."""

    def __init__(self, path, servers, finish_every=0.05, check_after=0.05):
        super().__init__(daemon=True)
        self.path = path
        self.servers = servers  # name -> {"status":..., "scur":..., "check": "pass"|"fail"}
        self.finish_every = finish_every
        self.check_after = check_after
        self.on_command = None  # called with each command before it is answered
        self.commands = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(5)

    def stat(self):
        lines = [HEADER]
        for name, server in sorted(self.servers.items()):
            fields = ["engines", name, "0", "", str(server["scur"])] + [""] * 12 + [server["status"]] + [""] * 18
            fields += [server.get("check_status") or ("L7OK" if server["status"].startswith("UP") else "L7TOUT"),
                       "200", "5"]
            lines.append(",".join(fields) + "\n")
        return "".join(lines)

    def run(self):
        while True:
            conn = self.sock.accept()[0]
            command = conn.recv(4096).decode().strip()
            self.commands.append(command)
            if self.on_command:
                self.on_command(self, command)
            answer = ""
            if command.startswith("show stat"):
                for server in self.servers.values():
                    if server["status"] in ("DRAIN", "MAINT") and server["scur"] and time.time() >= server.get("next", 0):
                        server["scur"] -= 1
                        server["next"] = time.time() + self.finish_every
                    if server["status"] == "UP 1/2" and time.time() >= server.get("check_at", 0):
                        passed = server.get("check", "pass") == "pass"
                        server["status"], server["check_status"] = ("UP", "L7OK") if passed else ("DOWN", "L7STS")
                answer = self.stat()
            elif command == "show servers state":
                answer = "1\n# be_id be_name srv_id srv_name\n" + "".join(
                    "3 engines %d %s\n" % (n, name) for n, name in enumerate(sorted(self.servers), 1))
            elif command.startswith("set server engines/"):
                name, state = command[len("set server engines/"):].split(" state ", 1)
                if name not in self.servers:
                    answer = "No such server.\n"
                else:
                    server = self.servers[name]
                    if state == "ready" and server["status"] == "MAINT":
                        server["status"], server["check_at"] = "UP 1/2", time.time() + self.check_after
                    elif state != "ready":
                        server["status"] = {"drain": "DRAIN", "maint": "MAINT"}[state]
                    answer = "\n"
            conn.sendall(answer.encode())
            conn.close()


@pytest.fixture
def haproxy(tmp_path):
    path = str(tmp_path / "admin.sock")
    fake = FakeHAProxy(path, {"gpu-box-01": {"status": "UP", "scur": 3}, "gpu-box-02": {"status": "UP", "scur": 0}})
    fake.start()
    return fake


@pytest.fixture
def run(run_module, haproxy):
    def call(check_mode=False, **args):
        args.setdefault("socket", haproxy.path)
        args.setdefault("poll", 0.01)
        if check_mode:
            args["_ansible_check_mode"] = True
        return run_module(gateway_server, **args)
    return call


def test_a_drain_waits_for_the_requests_in_flight_then_maintenance(run, haproxy):
    result = run(server="gpu-box-01", state="drained", drain_timeout=10)
    assert result["changed"] and not result.get("failed")
    assert result["drain"]["in_flight_at_start"] == 3 and not result["drain"]["timed_out"]
    assert haproxy.commands.index("set server engines/gpu-box-01 state drain") < \
        haproxy.commands.index("set server engines/gpu-box-01 state maint")
    assert haproxy.servers["gpu-box-01"] == dict(haproxy.servers["gpu-box-01"], status="MAINT", scur=0)
    again = run(server="gpu-box-01", state="drained")
    assert again["changed"] is False


def test_a_drain_that_runs_out_of_time_goes_on_and_says_how_many_are_cut(run, haproxy):
    haproxy.finish_every = 60
    result = run(server="gpu-box-01", state="drained", drain_timeout=0)
    assert result["drain"]["timed_out"] and result["drain"]["left_in_flight"] >= 1
    assert "still in flight" in result["warnings"][0]
    assert haproxy.servers["gpu-box-01"]["status"] == "MAINT"


def test_ready_puts_a_box_back_and_waits_for_up(run, haproxy):
    haproxy.servers["gpu-box-02"]["status"] = "MAINT"
    result = run(server="gpu-box-02", state="ready", ready_timeout=5)
    assert result["changed"] and haproxy.servers["gpu-box-02"]["status"] == "UP"
    assert run(server="gpu-box-02", state="ready")["changed"] is False


def test_a_box_is_named_by_its_inventory_name_as_the_gateway_names_it(run, haproxy):
    # gateway_plan names the server of inventory host "gpu box@03" gpu_box_03 in HAProxy's configuration.
    haproxy.servers["gpu_box_03"] = {"status": "UP", "scur": 0}
    result = run(server="gpu box@03", state="drained")
    assert result["changed"] and result["server"] == "gpu_box_03"
    assert "set server engines/gpu_box_03 state maint" in haproxy.commands
    assert run(server="gpu box@03", state="query")["server"] == "gpu_box_03"


def test_check_mode_sends_no_command(run, haproxy):
    result = run(check_mode=True, server="gpu-box-01", state="drained")
    assert result["changed"] and not any(c.startswith("set ") for c in haproxy.commands)


def test_unknown_boxes_and_a_missing_socket(run, haproxy, tmp_path):
    assert run(server="gpu-box-09", state="drained") == dict(
        changed=False, known=False, server="gpu-box-09", servers=run()["servers"])
    # A box held out when the gateway was configured: putting it back warns, and a rolling
    # restart goes on (the next gateway run adds it).
    held_out = run(server="gpu-box-09", state="ready")
    assert not held_out.get("failed") and held_out["known"] is False
    assert any(w.startswith("[W_GATEWAY] gpu-box-09:") for w in held_out["warnings"])
    missing = run(socket=str(tmp_path / "none.sock"), state="query")
    assert missing["failed"] and "cannot read HAProxy's runtime API" in missing["msg"]
    assert os.path.exists(haproxy.path)


def test_ready_waits_for_a_check_that_ran_after_the_command(run, haproxy):
    # Leaving maintenance HAProxy reads "UP 1/2" before any check: that is no proof yet.
    haproxy.servers["gpu-box-02"]["status"] = "MAINT"
    haproxy.check_after = 0.3
    started = time.time()
    result = run(server="gpu-box-02", state="ready", ready_timeout=5)
    assert not result.get("failed") and result["changed"] and time.time() - started >= 0.3
    assert haproxy.servers["gpu-box-02"]["status"] == "UP"


def test_ready_fails_with_the_last_check_when_the_gateway_cannot_reach_the_box(run, haproxy):
    haproxy.servers["gpu-box-02"].update(status="MAINT", check="fail")
    result = run(server="gpu-box-02", state="ready", ready_timeout=1)
    assert result["failed"] and result["msg"].startswith("[E_GATEWAY] gpu-box-02: put back, but no gateway check")
    assert "DOWN, last check L7STS" in result["msg"]


def test_ready_with_checks_off_cannot_be_proven(run, haproxy):
    haproxy.servers["gpu-box-02"]["status"] = "no check"
    result = run(server="gpu-box-02", state="ready", ready_timeout=5)
    assert result["failed"] and "checks off" in result["msg"] and "enable health engines/gpu-box-02" in result["msg"]
    assert not any(c.startswith("set ") for c in haproxy.commands)


def test_a_socket_that_goes_away_before_set_server_is_e_gateway(run, haproxy):
    def vanish(fake, command):
        if os.path.exists(fake.path):  # HAProxy stops after answering this read
            os.unlink(fake.path)
    haproxy.on_command = vanish
    result = run(server="gpu-box-02", state="drained")
    assert result["failed"] and result["msg"].startswith("[E_GATEWAY] gpu-box-02: cannot read HAProxy's runtime API")
    assert haproxy.commands == ["show stat engines 4 -1"]


def test_permission_denied_on_the_socket_says_so(run, monkeypatch):
    def denied(self, command):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(gateway_server.RuntimeApi, "send", denied)
    result = run(state="query")
    assert result["failed"] and "permission denied on HAProxy's runtime API" in result["msg"]
    assert "become: true" in result["msg"] and "--tags gateway" not in result["msg"]


def test_a_server_that_leaves_the_configuration_mid_drain_ends_the_wait(run, haproxy):
    def reload_without_it(fake, command):
        if command.startswith("show stat") and fake.servers.get("gpu-box-01", {}).get("status") == "DRAIN":
            fake.servers.pop("gpu-box-01")
    haproxy.on_command = reload_without_it
    haproxy.finish_every = 60
    started = time.time()
    result = run(server="gpu-box-01", state="drained", drain_timeout=30)
    assert result["failed"] and time.time() - started < 5
    assert "left the gateway's configuration while it drained" in result["msg"]


def test_the_server_state_is_saved_for_the_next_start(run, haproxy, tmp_path):
    state = tmp_path / "server-state"
    assert run(state="saved", state_file=str(state)) == {"changed": True, "saved": True}
    assert state.read_text().startswith("1\n") and "engines 1 gpu-box-01" in state.read_text()
    # A drain rewrites it, so a later start does not bring back an older state of that box.
    state.write_text("1\n")
    run(server="gpu-box-02", state="drained", state_file=str(state))
    assert "gpu-box-02" in state.read_text()
    # Not running: nothing to keep, and no failure.
    assert run(state="saved", socket=str(tmp_path / "none.sock"), state_file=str(state))["saved"] is False
    assert run(check_mode=True, state="saved", state_file=str(tmp_path / "other"))["saved"] is False
    assert not (tmp_path / "other").exists()
