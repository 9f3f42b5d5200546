"""The gateway role's haproxy.cfg, rendered by Ansible from the role's template and defaults, run
by the real HAProxy (Debian's package) on loopback: it passes ``haproxy -c`` and its default
front answers on IPv6 and IPv4 alike. Skipped where HAProxy is not installed."""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_run import ROOT, run_playbook

HAPROXY = shutil.which("haproxy")
ROLE = os.path.join(ROOT, "roles", "gateway")

pytestmark = pytest.mark.skipif(not HAPROXY, reason="needs HAProxy (Debian's haproxy package)")


def free_port():
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::", 0))
        return sock.getsockname()[1]


def render(tmp_path, **settings):
    """haproxy.cfg as the role writes it, its files under tmp_path; returns its text."""
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    gateway-01: {ansible_connection: local, "
                                        "ansible_python_interpreter: %s}\n" % sys.executable)
    values = dict({"gateway_runtime_socket": str(tmp_path / "admin.sock"),
                   "gateway_state_file": str(tmp_path / "server-state"),
                   "gateway_plan": {"servers": [{"name": "gpu-box-01", "address": "127.0.0.1", "port": 9}],
                                    "held_out": []},
                   "tensorfold_api_key": "", "tensorfold_served_name": "GLM-5.3-Flash"}, **settings)
    (tmp_path / "render.yml").write_text(textwrap.dedent("""\
        - hosts: gateway-01
          gather_facts: false
          vars_files: [{defaults}, {vars}, {values}]
          tasks:
            - ansible.builtin.template: {{src: {template}, dest: {dest}, mode: "0644"}}
        """).format(defaults=os.path.join(ROLE, "defaults", "main.yml"), vars=os.path.join(ROLE, "vars", "main.yml"),
                    values=tmp_path / "values.yml", template=os.path.join(ROLE, "templates", "haproxy.cfg.j2"),
                    dest=tmp_path / "haproxy.cfg"))
    (tmp_path / "values.yml").write_text(json.dumps(values))
    rc, output = run_playbook(tmp_path / "render.yml", tmp_path / "hosts.yml", tmp_path)
    assert rc == 0, output
    text = (tmp_path / "haproxy.cfg").read_text()
    # The Debian paths the test cannot use here (no chroot, no syslog socket, no haproxy user).
    for line in ("    chroot /var/lib/haproxy\n", "    user haproxy\n", "    group haproxy\n", "    daemon\n"):
        text = text.replace(line, "")
    (tmp_path / "haproxy.cfg").write_text(text)
    return text


def get(address, port, path):
    """The status code HAProxy answers on address:port, waiting up to 10 s for it to listen."""
    deadline = time.time() + 10
    while True:
        try:
            with socket.create_connection((address, port), timeout=5) as conn:
                conn.sendall(("GET %s HTTP/1.0\r\n\r\n" % path).encode())
                return conn.recv(64).decode(errors="replace").split(" ")[1]
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)


def test_the_default_front_answers_on_ipv6_and_ipv4(tmp_path):
    port, stats = free_port(), free_port()
    text = render(tmp_path, gateway_port=port, gateway_stats_port=stats)
    assert "    bind :::%d v4v6\n" % port in text
    # HAProxy 2.4 hands its listeners to the reloaded process only through such a socket.
    assert "level admin expose-fd listeners\n" in text
    checked = subprocess.run([HAPROXY, "-c", "-q", "-f", str(tmp_path / "haproxy.cfg")], capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    proxy = subprocess.Popen([HAPROXY, "-db", "-f", str(tmp_path / "haproxy.cfg")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        # No box answers here: HAProxy's own 503 on the clients' front, its stats page on the other.
        assert get("::1", port, "/v1/models") == "503" and get("127.0.0.1", port, "/v1/models") == "503"
        assert get("::1", stats, "/stats") == "200"
    finally:
        proxy.terminate()
        proxy.wait(10)


def test_an_explicit_address_is_the_operators(tmp_path):
    text = render(tmp_path, gateway_bind="10.20.0.5", gateway_stats_bind="127.0.0.1")
    assert "    bind 10.20.0.5:8020\n" in text and "    bind 127.0.0.1:8404\n" in text
