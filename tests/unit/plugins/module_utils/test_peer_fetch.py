# -*- coding: utf-8 -*-
"""A single file served by the peer server (the image archive) and its client: only the run's
secret gets a byte, the copy is kept only with the right size and sha256, a broken transfer is
fetched again, a server that is still starting is waited for."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client
import os
import socket
import stat
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer

SECRET = "s3cretForThisRunOnly0123456789"
ARCHIVE = os.urandom(3 * 1024 * 1024 + 17)  # pieces of 1 MiB and a short one
DIGEST = hashlib.sha256(ARCHIVE).hexdigest()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    def __init__(self, tmp_path, data=ARCHIVE, delay=0.0):
        self.path = tmp_path / "served" / "abc123.tar"
        self.path.parent.mkdir()
        self.path.write_bytes(data)
        self.port = free_port()
        self.stop = tmp_path / "stop"
        self.outcome = {}
        ready = threading.Event()

        def run():
            time.sleep(delay)
            self.outcome.update(hf_peer.serve([], "127.0.0.1", self.port, str(self.stop), 60, SECRET, idle_timeout=30,
                                              ready=ready, files=[{"name": "abc123.tar", "path": str(self.path)}]))

        self.thread = threading.Thread(target=run)
        self.thread.start()
        if not delay:
            ready.wait(10)
        self.url = "http://127.0.0.1:%d/files/abc123.tar" % self.port

    def close(self):
        self.stop.write_text("")
        self.thread.join(10)


@pytest.fixture(name="served")
def served_fixture(tmp_path):
    served = Served(tmp_path)
    yield served
    served.close()


def get(port, path, secret=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Authorization": "Bearer " + secret} if secret else {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def test_a_named_file_is_served_only_with_the_secret(served):
    assert get(served.port, "/files/abc123.tar") == (401, b'{"error": "this run\'s secret is required"}')
    assert get(served.port, "/files/abc123.tar", "wrong-secret-0123456789")[0] == 401
    assert get(served.port, "/files/abc123.tar", SECRET) == (200, ARCHIVE)
    assert get(served.port, "/files/other.tar", SECRET)[0] == 404
    assert get(served.port, "/files/../served/abc123.tar", SECRET)[0] == 404


def test_the_server_refuses_odd_names_missing_files_and_nothing_to_serve(tmp_path):
    with pytest.raises(ValueError, match="not a plain file name"):
        hf_peer.servable_files([{"name": "../x.tar", "path": "/etc/hostname"}])
    with pytest.raises(ValueError, match="is not a file"):
        hf_peer.servable_files([{"name": "x.tar", "path": str(tmp_path / "missing.tar")}])
    with pytest.raises(ValueError, match="nothing to serve"):
        hf_peer.serve([], "127.0.0.1", free_port(), str(tmp_path / "stop"), 60, SECRET, files=[])


def test_fetch_keeps_the_file_with_its_size_and_sha256_and_mode(served, tmp_path):
    dest = tmp_path / "host" / "archive" / "abc123.tar"
    result = hf_peer.fetch_file(served.url, str(dest), len(ARCHIVE), DIGEST, SECRET, mode=0o640)
    assert result["changed"] and result["bytes"] == len(ARCHIVE) and result["attempts"] == 1
    assert dest.read_bytes() == ARCHIVE and stat.S_IMODE(dest.stat().st_mode) == 0o640
    assert not (tmp_path / "host" / "archive" / "abc123.tar.part").exists()
    again = hf_peer.fetch_file(served.url, str(dest), len(ARCHIVE), DIGEST, SECRET)
    assert not again["changed"] and again["attempts"] == 0


def test_fetch_of_other_bytes_fails_after_every_attempt_and_leaves_nothing(served, tmp_path):
    dest = tmp_path / "abc123.tar"
    with pytest.raises(hf_peer.FetchError, match=r"expected %d bytes with sha256 %s \(3 attempts\)" % (len(ARCHIVE), "0" * 64)):
        hf_peer.fetch_file(served.url, str(dest), len(ARCHIVE), "0" * 64, SECRET)
    assert not dest.exists() and not (tmp_path / "abc123.tar.part").exists()
    assert served.outcome == {} and hf_peer.PeerHandler.stats["requests"] == 3


def test_fetch_with_a_wrong_secret_fails_at_once(served, tmp_path):
    with pytest.raises(hf_peer.FetchError, match="refused this run's secret"):
        hf_peer.fetch_file(served.url, str(tmp_path / "a.tar"), len(ARCHIVE), DIGEST, "another-secret-0123456789")
    assert hf_peer.PeerHandler.stats["refused"] == 1


def test_fetch_waits_for_a_server_that_is_still_starting(tmp_path):
    served = Served(tmp_path, delay=1.5)
    try:
        result = hf_peer.fetch_file(served.url, str(tmp_path / "a.tar"), len(ARCHIVE), DIGEST, SECRET, wait=20)
    finally:
        served.close()
    assert result["changed"] and result["seconds"] >= 1.0
    with pytest.raises(hf_peer.FetchError, match="cannot reach"):
        hf_peer.fetch_file("http://127.0.0.1:%d/files/a.tar" % free_port(), str(tmp_path / "b.tar"),
                           len(ARCHIVE), DIGEST, SECRET, wait=1)


class BreaksOnce(BaseHTTPRequestHandler):
    """Promises the whole file, sends half of it and hangs up the first time; then serves it."""
    protocol_version = "HTTP/1.1"
    calls = []

    def log_message(self, fmt, *args):
        return

    def do_GET(self):
        self.calls.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(ARCHIVE)))
        self.end_headers()
        if len(self.calls) == 1:
            self.wfile.write(ARCHIVE[:len(ARCHIVE) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(ARCHIVE)


def test_a_transfer_that_breaks_off_is_fetched_again(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), BreaksOnce)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/files/abc123.tar" % server.server_address[1]
        result = hf_peer.fetch_file(url, str(tmp_path / "a.tar"), len(ARCHIVE), DIGEST, SECRET)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert result["attempts"] == 2 and (tmp_path / "a.tar").read_bytes() == ARCHIVE
    assert BreaksOnce.calls == ["Bearer " + SECRET] * 2
