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
    one per `finish_every` seconds."""

    def __init__(self, path, servers, finish_every=0.05):
        super().__init__(daemon=True)
        self.path = path
        self.servers = servers  # name -> {"status":..., "scur":...}
        self.finish_every = finish_every
        self.commands = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(5)

    def stat(self):
        lines = [HEADER]
        for name, server in sorted(self.servers.items()):
            fields = ["engines", name, "0", "", str(server["scur"])] + [""] * 12 + [server["status"]] + [""] * 18
            fields += ["L7OK" if server["status"] == "UP" else "L7TOUT", "200", "5"]
            lines.append(",".join(fields) + "\n")
        return "".join(lines)

    def run(self):
        while True:
            conn = self.sock.accept()[0]
            command = conn.recv(4096).decode().strip()
            self.commands.append(command)
            answer = ""
            if command == "show stat":
                for server in self.servers.values():
                    if server["status"] in ("DRAIN", "MAINT") and server["scur"] and time.time() >= server.get("next", 0):
                        server["scur"] -= 1
                        server["next"] = time.time() + self.finish_every
                answer = self.stat()
            elif command.startswith("set server engines/"):
                name, state = command[len("set server engines/"):].split(" state ", 1)
                if name not in self.servers:
                    answer = "No such server.\n"
                else:
                    self.servers[name]["status"] = {"drain": "DRAIN", "maint": "MAINT", "ready": "UP"}[state]
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
