# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""gateway_server against a runtime API that answers as HAProxy 2.6 does (show stat CSV, set server
state ... answering an empty line), with requests in flight that finish while a box drains."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import parse_servers_state
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
        self.start_time = 0  # the process's start (show info's Start_time_sec), whole seconds
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

    def servers_state(self):
        """``show servers state`` as HAProxy 2.6 writes it (fixtures/haproxy-2.6-show-servers-state.txt):
        a server's address and port are its "address" and "port" (127.0.0.1 and 8020 unless set)."""
        lines = ["1\n", "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight "
                 "srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health "
                 "srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord "
                 "srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n"]
        for n, (name, server) in enumerate(sorted(self.servers.items()), 1):
            admin = 1 if server["status"] == "MAINT" else 0
            lines.append("3 engines %d %s %s 2 %d 1 1 5 6 3 3 6 0 0 0 - %d - 0 0 - - 0\n" % (
                n, name, server.get("address", "127.0.0.1"), admin, server.get("port", 8020)))
        return "".join(lines) + "\n"

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
            elif command == "show info":
                answer = "Name: HAProxy\nVersion: 2.6.12-1+deb12u4\nStart_time_sec: %d\n" % self.start_time
            elif command in ("show servers state", "show servers state engines"):
                answer = self.servers_state()
            elif command.startswith("set server engines/"):
                name, state = command[len("set server engines/"):].split(" state ", 1)
                if name not in self.servers:
                    answer = "No such server.\n"
                else:
                    server = self.servers[name]
                    if state == "ready" and server["status"] == "MAINT":
                        server["status"], server["check_at"] = "UP 1/2", time.time() + self.check_after
                    elif state == "maint" or (state == "drain" and server["status"] != "DOWN"):
                        # A server its check has down stays DOWN in drain (HAProxy 2.6's show stat).
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


def test_a_box_down_at_the_gateway_goes_to_maintenance_without_waiting(run, haproxy):
    # Wedged: its check has it DOWN and its 3 open requests will never finish. Waiting for them
    # would only run out drain_timeout.
    haproxy.servers["gpu-box-01"]["status"] = "DOWN"
    haproxy.finish_every = 600
    result = run(server="gpu-box-01", state="drained", drain_timeout=5)
    assert result["changed"] and haproxy.servers["gpu-box-01"]["status"] == "MAINT"
    assert result["drain"] == dict(result["drain"], down=True, timed_out=False, left_in_flight=3)
    assert "down at the gateway's check" in result["warnings"][0]
    drain, maint = (haproxy.commands.index("set server engines/gpu-box-01 state %s" % s) for s in ("drain", "maint"))
    assert maint - drain == 2  # one read after the drain command, then maintenance


def test_the_server_state_is_saved_for_the_next_start(run, haproxy, tmp_path):
    state = tmp_path / "server-state"
    assert run(state="saved", state_file=str(state)) == {"changed": True, "saved": True, "dropped": []}
    assert state.read_text().startswith("1\n") and "engines 1 gpu-box-01 127.0.0.1 " in state.read_text()
    # A drain rewrites it, so a later start does not bring back an older state of that box.
    state.write_text("1\n")
    run(server="gpu-box-02", state="drained", state_file=str(state))
    assert "gpu-box-02" in state.read_text()
    # Not running: nothing to keep, and no failure.
    assert run(state="saved", socket=str(tmp_path / "none.sock"), state_file=str(state))["saved"] is False
    assert run(check_mode=True, state="saved", state_file=str(tmp_path / "other"))["saved"] is False
    assert not (tmp_path / "other").exists()


def planned(haproxy, **changes):
    """The plan's servers for what the fake runs, with ``changes`` (name -> fields) applied."""
    return [dict({"host": name, "name": name, "address": server.get("address", "127.0.0.1"),
                  "port": server.get("port", 8020)}, **changes.get(name, {}))
            for name, server in sorted(haproxy.servers.items())]


def test_the_state_saved_before_a_reload_leaves_out_a_box_that_moves(run, haproxy, tmp_path):
    # HAProxy applies a saved port (and address) over the configuration's: a box the new
    # configuration moves must start from the configuration; the drained one stays drained.
    haproxy.servers["gpu-box-02"]["status"] = "MAINT"
    state = tmp_path / "server-state"
    result = run(state="saved", state_file=str(state),
                 servers=planned(haproxy, **{"gpu-box-01": {"address": "127.0.0.2", "port": 8022}}))
    assert result == {"changed": True, "saved": True, "dropped": ["gpu-box-01"]}
    assert "gpu-box-01" not in state.read_text()
    assert "3 engines 2 gpu-box-02 127.0.0.1 2 1 " in state.read_text()


def test_loaded_passes_once_the_reloaded_haproxy_serves_the_plan(run, haproxy):
    # A reload is a signal: the old process answers for a while before the new one takes over.
    def new_process_after_two_reads(fake, command):
        if sum(c.startswith("show servers state") for c in fake.commands) == 3:
            fake.servers["gpu-box-01"]["port"] = 8022
    haproxy.on_command = new_process_after_two_reads
    result = run(state="loaded", servers=planned(haproxy, **{"gpu-box-01": {"port": 8022}}), load_timeout=30)
    assert result == {"changed": False}
    assert haproxy.commands.count("show servers state engines") == 3


def test_loaded_fails_when_the_old_process_runs_on(run, haproxy, tmp_path):
    # systemctl reload succeeds and HAProxy's new process fails (a port in use): the old one
    # serves the old servers.
    result = run(state="loaded", servers=planned(haproxy, **{"gpu-box-01": {"port": 8022}}) + [
        {"host": "gpu-box-03", "name": "gpu-box-03", "address": "gpu-box-03.example", "port": 8020}], load_timeout=0)
    assert result["failed"] and result["msg"].startswith("[E_GATEWAY] gateway: HAProxy does not serve this run's")
    assert result["differences"] == ["gpu-box-01 at port 8020, not 8022", "gpu-box-03 missing"]
    assert "journalctl -u haproxy" in result["msg"]
    # The same servers, from a process older than the configuration (only a front changed).
    config = tmp_path / "haproxy.cfg"
    config.write_text("# changed\n")
    haproxy.start_time = int(os.stat(str(config)).st_mtime) - 60
    result = run(state="loaded", servers=planned(haproxy), config_files=[str(config), str(tmp_path / "none.map")],
                 load_timeout=0)
    assert result["failed"] and result["differences"] == [
        "its process started before haproxy.cfg was last written"]
    haproxy.start_time += 60
    assert run(state="loaded", servers=planned(haproxy), config_files=[str(config)], load_timeout=0) == {"changed": False}
    assert run(check_mode=True, state="loaded", servers=[])["changed"] is False


def free_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def reload_master(proxy):
    """SIGUSR2 to HAProxy's master (Debian's systemctl reload), once it handles it: the worker
    answers its socket before the master has left its start (SIGUSR2 still blocked, then lost)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        with open("/proc/%d/status" % proxy.pid) as status:
            caught = [int(line.split()[1], 16) for line in status if line.startswith("SigCgt:")][0]
        if caught & (1 << (signal.SIGUSR2 - 1)):
            break
        time.sleep(0.05)
    proxy.send_signal(signal.SIGUSR2)


@pytest.mark.skipif(not shutil.which("haproxy"), reason="needs HAProxy (Debian's haproxy package)")
def test_a_reload_with_the_real_haproxy_moves_a_box_keeps_a_drained_one_and_a_failed_one_is_caught(
        run_module, tmp_path):
    # HAProxy in master-worker mode as Debian's unit runs it (-Ws, reloaded with SIGUSR2), with
    # the gateway role's state file lines (load-server-state-from-file, init-addr last).
    sock, state, config = (str(tmp_path / name) for name in ("admin.sock", "server-state", "haproxy.cfg"))
    front, port_a, port_b, moved = free_port(), free_port(), free_port(), free_port()

    def render(servers, bind):
        with open(config, "w") as out:
            out.write("global\n    stats socket %s mode 600 level admin\n    server-state-file %s\n"
                      "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n"
                      "    load-server-state-from-file global\nfrontend openai\n    bind 127.0.0.1:%d\n"
                      "    default_backend engines\nbackend engines\n"
                      "    default-server check inter 60s init-addr last,libc,none\n" % (sock, state, bind))
            out.writelines("    server %s %s:%d\n" % (s["name"], s["address"], s["port"]) for s in servers)
        return servers

    def call(**args):
        return run_module(gateway_server, socket=sock, poll=0.05, **args)

    with open(state, "w") as out:
        out.write("1\n")
    first = render([{"name": "box-a", "address": "127.0.0.1", "port": port_a},
                    {"name": "box-b", "address": "localhost", "port": port_b}], front)
    log = open(str(tmp_path / "haproxy.log"), "w")
    proxy = subprocess.Popen(["haproxy", "-Ws", "-f", config], stdout=log, stderr=subprocess.STDOUT)
    try:
        assert call(state="loaded", servers=first, load_timeout=30) == {"changed": False}
        assert call(server="box-b", state="drained")["changed"]
        # The handler's save, then the reload onto a plan that moves box-a.
        second = [dict(first[0], address="127.0.0.2", port=moved), first[1]]
        assert call(state="saved", state_file=state, servers=second)["dropped"] == ["box-a"]
        render(second, front)
        reload_master(proxy)
        assert call(state="loaded", servers=second, load_timeout=30) == {"changed": False}, (
            tmp_path / "haproxy.log").read_text()
        rows = parse_servers_state(gateway_server.RuntimeApi(sock).send("show servers state engines"))
        assert [(r["srv_name"], r["srv_addr"], r["srv_port"], r["srv_admin_state"]) for r in rows] == [
            ("box-a", "127.0.0.2", str(moved), "0"), ("box-b", "127.0.0.1", str(port_b), "1")]
        # A configuration that passes haproxy -c but cannot bind: the old process runs on. With
        # another server, the servers tell; with the front's port alone, the process's start.
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        render([first[0], second[1]], taken.getsockname()[1])
        reload_master(proxy)
        failed = call(state="loaded", servers=[first[0], second[1]], config_files=[config], load_timeout=3)
        # (Written in the second the process started, perhaps: that alone does not tell.)
        assert failed["failed"] and failed["differences"][:2] == [
            "box-a at address 127.0.0.2, not 127.0.0.1", "box-a at port %d, not %d" % (moved, port_a)]
        while time.time() < os.stat(config).st_mtime + 1:  # the next second (Start_time_sec is whole seconds)
            time.sleep(0.05)
        render(second, taken.getsockname()[1])
        reload_master(proxy)
        failed = call(state="loaded", servers=second, config_files=[config], load_timeout=3)
        taken.close()
        assert failed["failed"] and failed["differences"] == ["its process started before haproxy.cfg was last written"]
        render(second, front)
        reload_master(proxy)
        assert call(state="loaded", servers=second, config_files=[config], load_timeout=30) == {"changed": False}
    finally:
        proxy.terminate()
        proxy.wait(10)
        log.close()
