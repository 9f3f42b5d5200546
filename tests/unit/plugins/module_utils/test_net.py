# -*- coding: utf-8 -*-
"""module_utils/net.py's GET without http.client: answers framed each way HTTP/1.1 allows, read from a
byte stream and from servers on a TCP and a unix socket that keep the connection open after
answering (as Docker's does), and answers that are not HTTP."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import socket
import threading
from urllib.parse import quote, urlsplit

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import net


def answer(raw):
    return net.read_answer(io.BytesIO(raw))


def test_a_body_framed_by_its_length_stops_there():
    assert answer(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n{}{}extra") == (200, b"{}{}")


def test_a_chunked_body_is_joined_past_extensions_and_a_trailer():
    raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"4;name=value\r\nWiki\r\n6\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\n")
    assert answer(raw) == (200, b"Wikipedia in \r\n\r\nchunks.")


def test_without_length_or_chunks_the_body_runs_to_the_close():
    assert answer(b"HTTP/1.0 503 Service Unavailable\nServer: x\n\nnot yet") == (503, b"not yet")


def test_interim_answers_are_passed_over_and_204_has_no_body():
    assert answer(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") == (200, b"ok")
    assert answer(b"HTTP/1.1 204 No Content\r\n\r\nleftover") == (204, b"")


@pytest.mark.parametrize("raw, said", [
    (b"", "closed without an answer"),
    (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP answer"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "cut short: 5 of 10 bytes"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", "not a number"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size that is not a number"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabc", "cut short inside a chunk"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n", "more than 100 header lines"),
])
def test_what_is_not_http_raises_an_os_error_that_says_what(raw, said):
    with pytest.raises(net.BadAnswer, match=said) as raised:
        answer(raw)
    assert isinstance(raised.value, OSError)  # callers treat it as a failed connection


class KeepAliveServer:
    """Answers one request per connection with ``reply`` and keeps the connection open until the
    test ends, as an HTTP/1.1 server may: a client that waited for the close would time out."""

    def __init__(self, listener, reply):
        self.listener, self.reply, self.requests, self.open = listener, reply, [], []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, dummy = self.listener.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            self.requests.append(data.decode("latin-1"))
            conn.sendall(self.reply)
            self.open.append(conn)

    def close(self):
        self.listener.close()
        for conn in self.open:
            conn.close()


def loopback_server(reply):
    """(port, KeepAliveServer) answering ``reply`` on 127.0.0.1."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    return listener.getsockname()[1], KeepAliveServer(listener, reply)


def test_http_get_sends_one_closing_get_and_reads_a_chunked_answer_of_an_open_connection():
    port, server = loopback_server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
    try:
        assert net.http_get("http://127.0.0.1:%d/health?x=1" % port, 5, headers={"Authorization": "Bearer k"}) == (200, b"ok")
    finally:
        server.close()
    lines = server.requests[0].split("\r\n")
    assert lines[0] == "GET /health?x=1 HTTP/1.1"
    assert set(lines[1:5]) == {"Host: 127.0.0.1:%d" % port, "Connection: close", "Accept-Encoding: identity",
                               "Authorization: Bearer k"}


def test_unix_get_reads_docker_s_way_of_answering(tmp_path):
    path = str(tmp_path / "docker.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    server = KeepAliveServer(listener, b"HTTP/1.1 404 Not Found\r\nApi-Version: 1.47\r\nContent-Type: application/json\r\n"
                                       b"Content-Length: 44\r\n\r\n{\"message\":\"No such container: glm53-zig\"}\n\n")
    try:
        assert net.unix_get(path, "/containers/glm53-zig/json", 5) == (404, b"{\"message\":\"No such container: glm53-zig\"}\n\n")
    finally:
        server.close()
    assert server.requests[0].startswith("GET /containers/glm53-zig/json HTTP/1.1\r\nHost: localhost\r\n")


def test_unix_get_of_a_missing_socket_raises_an_os_error(tmp_path):
    with pytest.raises(OSError):
        net.unix_get(str(tmp_path / "none.sock"), "/info", 1)


def test_wait_for_listener_waits_for_a_server_that_starts_late_and_gives_up_on_one_that_never_does():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    started = threading.Timer(0.6, lambda: (listener.bind(("127.0.0.1", port)), listener.listen(1)))
    started.start()
    try:
        assert net.wait_for_listener("http://127.0.0.1:%d/x" % port, 10)
    finally:
        started.join()
        listener.close()
    # The clock read at the start, then before each try and after each refusal: two tries, one nap.
    ticks = iter([0.0, 0.0, 5.0, 9.0, 12.0])
    naps = []
    assert not net.wait_for_listener("http://127.0.0.1:%d" % port, 10, clock=lambda: next(ticks), sleep=naps.append)
    assert naps == [0.2]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8020/health", "http://127.0.0.1:8020", "http://Box-1.Example:80/v1/models?x=1&y=2",
    "HTTP://box/", "http://box?q=1", "http://box:8020?q=1/2", "http://box/p?", "http://box/p#frag?x",
    "http://[::1]:8020/health", "http://[2001:DB8::5]/", "http://box:/x", "http://box/a%20b",
])
def test_a_plain_http_url_is_read_as_urlsplit_reads_it(url):
    split = urlsplit(url)
    assert net.plain_http(url) == (split.hostname, split.port or 80,
                                   (split.path or "/") + ("?" + split.query if split.query else ""))


@pytest.mark.parametrize("url", [
    "https://box/health", "ftp://box/", "http://user:secret@box/", "http://box:0/", "http://box:65536/",
    "http://box:80x/", "http://[::1/", "http://[::1]x/", "http://a:b:c/", "http:///path", "http://box/a b",
    "http://box/\tx", "http://",
])
def test_other_urls_are_left_to_urlsplit(url):
    assert net.plain_http(url) is None


@pytest.mark.parametrize("text", ["glm53-tensorfold", "glm53/tensorfold-native:5c83f51c", "a b/c?d#e&f=g%h",
                                  "reg.example:5000/img@sha256:" + "0" * 64, "caf\u00e9~_.-", ""])
@pytest.mark.parametrize("safe", ["", ":/", "/"])
def test_quote_encodes_as_urllib_does(text, safe):
    assert net.quote(text, safe=safe) == quote(text, safe=safe)


def test_http_get_reaches_a_name_with_several_addresses_and_an_ipv6_literal():
    served = []
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            listener = socket.socket(family)
            listener.bind((address, 0))
        except OSError:  # no IPv6 on this machine's loopback
            continue
        listener.listen(4)
        served.append((address, listener.getsockname()[1],
                       KeepAliveServer(listener, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
    try:
        for address, port, unused in served:
            host = "[%s]" % address if ":" in address else address
            assert net.http_get("http://%s:%d/health" % (host, port), 5) == (200, b"ok")
    finally:
        for unused, unused_port, server in served:
            server.close()
    assert served[0][2].requests[0].startswith("GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % served[0][1])


def test_a_url_without_a_host_name_reaches_the_loopback_address_as_before():
    port, server = loopback_server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    try:
        assert net.http_get("http://:%d/health" % port, 5) == (200, b"ok")
    finally:
        server.close()


def test_http_get_of_a_closed_port_raises_an_os_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError):
        net.http_get("http://localhost:%d/health" % port, 2)
