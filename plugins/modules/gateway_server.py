#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gateway_server
short_description: Drain a box at the site gateway, put it back, or read every box's state there
version_added: 0.2.0
description:
  - Talks to HAProxy's runtime API over its admin socket on the gateway host (the
    C(stats socket ... level admin) line the gateway role writes).
  - "O(state=drained) takes one server out of rotation the way a rolling restart needs it: no new
    request goes to it (C(set server B/S state drain)), the module waits until the requests in
    flight on it have finished, at most O(drain_timeout) seconds, then puts it in maintenance
    (C(state maint)), which also pauses its health checks. A drain that runs out of time does
    not fail; it says how many requests were still in flight. A server the gateway's check has
    down (C(DOWN)) goes to maintenance without waiting: it gets no new request, and the requests
    open on an engine that fails its check (wedged) would not finish."
  - "O(state=ready) puts the server back (C(set server B/S state ready)) and waits, at most
    O(ready_timeout) seconds, until a health check (a real completion) that ran after the command
    has passed; it fails (E_GATEWAY, with the last check's status) when none has. Leaving
    maintenance HAProxy shows the server C(UP 1/2) at once, before any check: only a plain C(UP)
    (its health full again) proves a passed check, which needs C(fall) 2 or more (the gateway
    role's pre-flight refuses less). A server with checks off (C(no check)) cannot prove one: that
    fails at once."
  - "A server that leaves the gateway's configuration while it drains (a reload without it) ends
    the drain at once with E_GATEWAY: its requests in flight can no longer be followed."
  - "O(state=saved) writes every server's runtime state (C(show servers state)) to O(state_file),
    which HAProxy reads when it starts (C(load-server-state-from-file)): run before a reload, a box
    left in maintenance stays out and the others keep their health. Nothing when HAProxy is not
    running. With O(state=drained) or O(state=ready), O(state_file) is written after the change too,
    so the file never holds an older state of that box."
  - "HAProxy applies a saved server's address and port over the configuration's. With O(servers)
    (the plan the reload brings), O(state=saved) keeps only the servers the plan keeps at the same
    address and port; the others start from the configuration."
  - "O(state=loaded) waits, at most O(load_timeout) seconds, until the running HAProxy serves
    exactly O(servers) (names, addresses, ports) from a process started after O(config_files)
    were last written (C(show info)'s C(Start_time_sec)): a reload that HAProxy could not apply
    (the new process failed, the old one runs on) fails with E_GATEWAY. It changes nothing."
  - O(state=query) changes nothing; with O(wait_settled) it first waits until no server of the
    backend is between states (a check moving it, or its first check not done yet).
  - "Check mode: O(state=drained) and O(state=ready) report what they would change and send no command;
    O(state=loaded) checks nothing (no reload ran)."
author:
  - glm53.tensorfold contributors (@glm53)
options:
  socket:
    description: HAProxy's admin socket.
    type: path
    default: /run/haproxy/admin.sock
  backend:
    description: The backend holding the fleet's servers.
    type: str
    default: engines
  server:
    description:
      - The box to drain or put back, by its inventory name; required unless O(state=query).
      - Named at the gateway the way M(glm53.tensorfold.gateway_plan) names it (characters HAProxy does not allow
        in a name replaced by C(_)); RV(server) returns that name.
    type: str
  state:
    description: What to do.
    type: str
    choices: [drained, ready, query, saved, loaded]
    default: query
  state_file:
    description:
      - HAProxy's C(server-state-file); required with O(state=saved), optional with O(state=drained) and
        O(state=ready) (written after the change).
    type: path
  servers:
    description:
      - "The servers the gateway's configuration names (M(glm53.tensorfold.gateway_plan)'s RV(glm53.tensorfold.gateway_plan#module:servers)):
        each with C(name), C(address) and C(port). Required with O(state=loaded); with O(state=saved), the
        state saved is only theirs."
    type: list
    elements: dict
  config_files:
    description:
      - With O(state=loaded), the files HAProxy reads when it starts (its configuration, the key map); the process
        that answers must have started after the newest was written. Files that do not exist are left out.
    type: list
    elements: path
    default: []
  load_timeout:
    description: With O(state=loaded), seconds to wait for the running HAProxy to serve O(servers).
    type: int
    default: 30
  drain_timeout:
    description: Seconds to wait for the requests in flight to finish before maintenance.
    type: int
    default: 900
  ready_timeout:
    description: Seconds to wait for the server's health check to pass after it is put back.
    type: int
    default: 60
  wait_settled:
    description: With O(state=query), wait (at most O(ready_timeout) seconds) until every server's first check is done.
    type: bool
    default: false
  poll:
    description: Seconds between two reads of the server's state while waiting.
    type: float
    default: 0.5
attributes:
  check_mode:
    description: Says what it would change and sends no command that changes HAProxy, and writes no file.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: Drain gpu-box-01 at the gateway, waiting up to 15 minutes for its requests
  glm53.tensorfold.gateway_server:
    server: gpu-box-01
    state: drained
    drain_timeout: 900
  delegate_to: gateway-01

- name: Put it back once its completion passes the gateway's check
  glm53.tensorfold.gateway_server:
    server: gpu-box-01
    state: ready
  delegate_to: gateway-01

- name: Read every box's state at the gateway
  glm53.tensorfold.gateway_server:
    state: query
  register: gateway_servers
"""

RETURN = r"""
servers:
  description: Every server of the backend after the action, as HAProxy reports it.
  returned: always
  type: list
  elements: dict
  contains:
    server: {description: The server's name (the box's inventory name as the gateway names it)., type: str}
    status: {description: "HAProxy's status text: UP, DOWN, MAINT, DRAIN, or UP 1/2 while a check moves it.", type: str}
    state: {description: "up, down, draining, drained, checking, unresolved (its address does not resolve) or unknown.", type: str}
    scur: {description: Requests in flight on it., type: int}
    check: {description: What its last health check saw., type: str}
server:
  description: The name of the box of O(server) at the gateway.
  returned: when O(server) is given
  type: str
  sample: gpu-box-01
saved:
  description: With O(state=saved), whether the state was written (false when HAProxy is not running, or in check mode).
  returned: when state is saved
  type: bool
dropped:
  description: With O(state=saved) and O(servers), the servers whose saved state was left out (not in O(servers), or at another address or port).
  returned: when state is saved and the state was written
  type: list
  elements: str
differences:
  description: With O(state=loaded), how the running servers differ from O(servers).
  returned: when state is loaded and they differ (the task fails)
  type: list
  elements: str
drain:
  description: With O(state=drained), how the drain went.
  returned: when state is drained and something was done
  type: dict
  contains:
    in_flight_at_start: {description: Requests in flight when the drain began., type: int}
    waited_s: {description: Seconds waited for them., type: float}
    timed_out: {description: Whether O(drain_timeout) ran out with requests still in flight., type: bool}
    left_in_flight: {description: Requests still in flight when maintenance began., type: int}
    down: {description: "Whether the gateway's check had the server down, so the drain did not wait.", type: bool}
"""

import errno
import os
import socket
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.gateway import (
    check_summary, drain_done, drain_waits, find, parse_servers_state, parse_show_stat, plan_differences, ready_outcome,
    server_name, server_state, settled, started_before, state_for_plan)


class RuntimeApi(object):
    """HAProxy's runtime API: one command per connection (non-interactive mode)."""

    def __init__(self, path, timeout=10.0):
        self.path = path
        self.timeout = timeout

    def send(self, command):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(self.timeout)
        try:
            conn.connect(self.path)
            conn.sendall((command + "\n").encode())
            chunks = []
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            conn.close()
        return b"".join(chunks).decode(errors="replace")

    def rows(self, backend=None):
        # "show stat BACKEND 4 -1": that backend's servers only, a light read for each poll.
        return parse_show_stat(self.send("show stat %s 4 -1" % backend if backend else "show stat"))


def write_state(text, path):
    """``show servers state``'s answer into ``path``, replaced whole (HAProxy never reads half a file)."""
    if not text.startswith("1\n"):  # the format version HAProxy reads back
        raise ValueError("unexpected answer to show servers state: %s" % text.strip()[:200])
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".server-state.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temp, 0o640)
        os.rename(temp, path)
    except Exception:
        if os.path.exists(temp):
            os.remove(temp)
        raise


def socket_problem(who, path, err):
    """E_GATEWAY text for a runtime API that cannot be used, with what to do for the cause."""
    if getattr(err, "errno", None) in (errno.EACCES, errno.EPERM):
        return ("[E_GATEWAY] %s: permission denied on HAProxy's runtime API at %s. Run the task as root "
                "(become: true) or as a member of the socket's group (haproxy), then run again." % (who, path))
    if getattr(err, "errno", None) in (errno.ENOENT, errno.ECONNREFUSED):
        return ("[E_GATEWAY] %s: cannot read HAProxy's runtime API at %s: %s. Run site.yml --tags gateway to set "
                "the gateway up, then run again." % (who, path, err))
    return ("[E_GATEWAY] %s: HAProxy's runtime API at %s failed: %s. Check that HAProxy is running on the "
            "gateway (systemctl status haproxy), then run again." % (who, path, err))


def public(rows, backend):
    return [{"server": r["server"], "status": r["status"], "state": server_state(r), "scur": r["scur"],
             "check": check_summary(r)} for r in rows if r["backend"] == backend]


def loaded(module, api, backend, params):
    """O(state=loaded): wait until the running HAProxy serves the plan's servers, else E_GATEWAY.
    A reload is a signal (systemctl reload returns before the new process runs): the old process
    answers until the new one takes over, and goes on answering when the new one failed."""
    if module.check_mode:
        module.exit_json(changed=False)  # no reload ran: the running process has the old plan
    present = [path for path in params["config_files"] if os.path.exists(path)]
    mtimes = [os.stat(path).st_mtime for path in present]
    deadline = time.time() + params["load_timeout"]
    while True:
        try:
            wrong = plan_differences(parse_servers_state(api.send("show servers state %s" % backend)), backend,
                                     params["servers"])
            if started_before(api.send("show info"), mtimes):
                wrong.append("its process started before %s was last written" % " or ".join(
                    os.path.basename(path) for path in present))
        except (OSError, socket.error) as err:
            # Between two processes the socket may be gone for a moment.
            if getattr(err, "errno", None) not in (errno.ENOENT, errno.ECONNREFUSED) or time.time() >= deadline:
                module.fail_json(msg=socket_problem("gateway", params["socket"], err))
            wrong = [str(err)]
        if not wrong or time.time() >= deadline:
            break
        time.sleep(params["poll"])
    if wrong:
        module.fail_json(msg="[E_GATEWAY] gateway: HAProxy does not serve this run's configuration after %d s (%s): "
                             "the reload failed and the previous process runs on. Read why with journalctl -u "
                             "haproxy (a port already in use, an address the host does not have), fix it, then run "
                             "site.yml --tags gateway again." % (params["load_timeout"], "; ".join(wrong)),
                         differences=wrong)
    module.exit_json(changed=False)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            socket=dict(type="path", default="/run/haproxy/admin.sock"),
            backend=dict(type="str", default="engines"),
            server=dict(type="str"),
            state=dict(type="str", choices=["drained", "ready", "query", "saved", "loaded"], default="query"),
            state_file=dict(type="path"),
            servers=dict(type="list", elements="dict"),
            config_files=dict(type="list", elements="path", default=[]),
            load_timeout=dict(type="int", default=30),
            drain_timeout=dict(type="int", default=900),
            ready_timeout=dict(type="int", default=60),
            wait_settled=dict(type="bool", default=False),
            poll=dict(type="float", default=0.5),
        ),
        required_if=[("state", "drained", ["server"]), ("state", "ready", ["server"]), ("state", "saved", ["state_file"]),
                     ("state", "loaded", ["servers"])],
        supports_check_mode=True,
    )
    params = module.params
    api = RuntimeApi(params["socket"])
    # The box's inventory name becomes its server name the way the gateway's configuration names it.
    backend, server = params["backend"], server_name(params["server"]) if params["server"] else None

    def finish(**result):
        if server:
            result["server"] = server
        module.exit_json(**result)

    who = module.params.get("server") or "gateway"

    def read():
        try:
            return api.rows(backend)
        except (OSError, socket.error) as err:
            module.fail_json(msg=socket_problem(who, params["socket"], err))

    def command(text):
        try:
            answer = api.send(text).strip()
        except (OSError, socket.error) as err:
            module.fail_json(msg=socket_problem(who, params["socket"], err))
        if answer:  # set server ... answers nothing when it worked
            module.fail_json(msg="[E_GATEWAY] %s: HAProxy refused '%s': %s. Check that the box is in the "
                                 "gateway's configuration (site.yml --tags gateway)." % (server, text, answer))

    def save(required):
        """The runtime state into state_file (only what suits O(servers) when given); None when
        there is nothing to write (no file asked for, check mode, HAProxy not running), else the
        servers left out. A failure fails O(state=saved), else warns."""
        if not params["state_file"] or module.check_mode:
            return None
        try:
            text = api.send("show servers state")
        except (OSError, socket.error) as err:
            if getattr(err, "errno", None) in (errno.ENOENT, errno.ECONNREFUSED):
                return None  # not running: its next start has no state to keep
            text, wrong = None, socket_problem(who, params["socket"], err)
        if text is not None:
            dropped = []
            if params["servers"] is not None and text.startswith("1\n"):
                text, dropped = state_for_plan(text, backend, params["servers"])
            try:
                write_state(text, params["state_file"])
                return dropped
            except (OSError, ValueError) as err:
                wrong = ("[E_GATEWAY] %s: cannot save HAProxy's server state to %s: %s. Check the folder, then "
                         "run again." % (who, params["state_file"], err))
        if required:
            module.fail_json(msg=wrong)
        module.warn(wrong)
        return None

    if params["state"] == "saved":
        dropped = save(True)
        if dropped is None:
            finish(changed=False, saved=False)
        finish(changed=True, saved=True, dropped=dropped)

    if params["state"] == "loaded":
        loaded(module, api, backend, params)

    rows = read()
    if params["state"] == "query":
        if params["wait_settled"] and not module.check_mode:
            deadline = time.time() + params["ready_timeout"]
            while not settled(rows, backend) and time.time() < deadline:
                time.sleep(params["poll"])
                rows = read()
        finish(changed=False, servers=public(rows, backend))

    row = find(rows, backend, server)
    if row is None and params["state"] == "drained":
        # A box the gateway does not forward to (held out) has nothing to drain.
        finish(changed=False, known=False, servers=public(rows, backend))
    if row is None and params["state"] == "ready":
        # A box held out when the gateway was last configured (it failed, or never went LIVE):
        # restarting it must not stop a rolling restart; the next gateway run adds it.
        finish(changed=False, known=False, servers=public(rows, backend), warnings=[
            "[W_GATEWAY] %s: the gateway has no server %s in backend %s (held out when it was last "
            "configured). Run site.yml --tags gateway to add it." % (server, server, backend)])
    if row is None:
        module.fail_json(msg="[E_GATEWAY] %s: the gateway has no server %s in backend %s. Run site.yml "
                             "--tags gateway so the gateway knows this box." % (server, server, backend),
                         servers=public(rows, backend))
    name = "%s/%s" % (backend, server)

    if params["state"] == "drained":
        if server_state(row) == "drained":
            finish(changed=False, servers=public(rows, backend))
        if module.check_mode:
            finish(changed=True, servers=public(rows, backend))
        command("set server %s state drain" % name)
        started = time.time()
        in_flight = row["scur"]
        row = find(read(), backend, server)
        while drain_waits(row) and not drain_done(row) and time.time() - started < params["drain_timeout"]:
            time.sleep(params["poll"])
            row = find(read(), backend, server)
        if row is None:
            # Gone from the configuration (a reload without it): its requests in flight, if any, are
            # on the old process, out of sight, so "drained" could not be told apart from "cut".
            module.fail_json(msg="[E_GATEWAY] %s: left the gateway's configuration while it drained (HAProxy was "
                                 "reloaded without it); its requests in flight can no longer be followed. Run "
                                 "site.yml --tags gateway, then run the restart again." % server,
                             servers=public(read(), backend))
        left, down = row["scur"], not drain_waits(row)
        command("set server %s state maint" % name)
        save(False)
        drain = {"in_flight_at_start": in_flight, "waited_s": round(time.time() - started, 1),
                 "timed_out": left > 0 and not down, "left_in_flight": left, "down": down}
        warnings = []
        if left and down:
            warnings.append("%s: down at the gateway's check, so its %d request%s in flight could not finish; the "
                            "restart cuts them." % (server, left, "" if left == 1 else "s"))
        elif left:
            warnings.append("%s: %d request%s still in flight after %d s of draining; the restart cuts them "
                            "(raise gateway_drain_timeout to wait longer)."
                            % (server, left, "" if left == 1 else "s", params["drain_timeout"]))
        finish(changed=True, drain=drain, servers=public(read(), backend), warnings=warnings)

    # ready
    if ready_outcome(row) == "passed":
        finish(changed=False, servers=public(rows, backend))
    if ready_outcome(row) == "no check":
        module.fail_json(msg="[E_GATEWAY] %s: the gateway has checks off for it (no check), so nothing can prove "
                             "that it answers. Turn them on (enable health %s on the gateway's runtime API), "
                             "then run again." % (server, name), servers=public(rows, backend))
    if module.check_mode:
        finish(changed=True, servers=public(rows, backend))
    command("set server %s state ready" % name)
    save(False)
    # From here only a check that ran after the command can make it a plain UP (ready_outcome).
    deadline = time.time() + params["ready_timeout"]
    row = find(read(), backend, server)
    while ready_outcome(row) == "waiting" and time.time() < deadline:
        time.sleep(params["poll"])
        row = find(read(), backend, server)
    rows = read()
    row = find(rows, backend, server)
    if ready_outcome(row) != "passed":
        module.fail_json(msg="[E_GATEWAY] %s: put back, but no gateway check passed within %d s (%s). The box "
                             "answers its smoke test but not the gateway's completion: check that the gateway "
                             "reaches it on its port and that gateway_check_timeout is long enough."
                         % (server, params["ready_timeout"], check_summary(row)),
                         servers=public(rows, backend))
    finish(changed=True, servers=public(rows, backend))


if __name__ == "__main__":
    main()
