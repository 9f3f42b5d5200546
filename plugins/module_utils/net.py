# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Addresses as they go into URLs (the engine's API, the gateway's), where the box itself reaches its
own API, and how it asks it (``http_get``, ``unix_get``), written once. Standard library only: the
box reader (plugin_utils/box_reader.py) sends this file to the hosts.

A plain GET over http (the engine's /health, the Docker API on its socket) is read here with a
socket and its buffered file, not ``http.client``: the fast path reads every box in every run,
and ``http.client`` costs each read about 18 ms of the box's CPU to import (with ``email`` and
``ssl``), about a quarter of the reader's run beyond Python's own start. What is read is HTTP/1.1 as RFC 9112 frames
it: a status line, headers, then a body framed by chunks, by Content-Length, or by the close of the
connection (the request says ``Connection: close``).

For the same reason a plain GET goes through ``_socket``, the C module under ``socket``, and
parses a plain ``http://`` URL itself: ``socket``'s import builds its enums and ``urllib.parse``'s
brings ``ipaddress``, together about 8 ms of the box's CPU a read (measured on a simulated box,
docs/development.md). Anything else (a file object of a socket, https, a URL with userinfo)
takes the full modules, imported when first needed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import time

try:
    import _socket
except ImportError:  # pragma: no cover  (an interpreter without CPython's C module: socket.py's names)
    import socket as _socket


def url_host(host):
    """An IPv6 literal in brackets (``2001:db8::5`` -> ``[2001:db8::5]``); names and IPv4 as they are."""
    host = str(host).strip()
    return "[%s]" % host if ":" in host and not host.startswith("[") else host


def public_endpoint(public_url, host, port):
    """The URL clients use for a box's API: ``public_url`` when set, else ``http://HOST:PORT/v1``
    (``host``: the box's ansible_host or inventory name)."""
    public_url = "" if public_url is None else str(public_url).strip()
    return public_url or "http://%s:%s/v1" % (url_host(host), port)


# Bind addresses that listen on every address of the box, where the box reaches its API on loopback.
EVERY_ADDRESS = ("0.0.0.0", "::", "")


def api_host(bind):
    """Where the box itself reaches an API bound to ``bind`` (tensorfold_host): ``127.0.0.1`` for
    every address (``0.0.0.0``, ``::`` or empty), else that address, since an engine bound to
    ``10.0.0.5`` does not answer on loopback."""
    bind = "" if bind is None else str(bind).strip()
    return "127.0.0.1" if bind in EVERY_ADDRESS else bind


class BadAnswer(IOError):
    """The other end answered what is not HTTP, or cut its answer short."""


# Bounds on what an answer's head may hold (http.client's own limits).
LINE_LIMIT = 65536
HEADER_LIMIT = 100


def http_get(url, timeout, headers=None):
    """GET url straight from the box: no proxy (a proxy in the environment must not stand between a
    box and its own service), no redirect, no certificate check. Returns (status, body) whatever the
    status; a failed connection or an answer that is not HTTP raises OSError (BadAnswer for the
    latter). An https URL goes through http_request (http.client and ssl, imported then)."""
    parts = plain_http(url)
    if parts is None:  # https, or an http URL plain_http leaves to urlsplit (userinfo, say)
        split = urlsplit(url)
        if split.scheme != "http":
            status, dummy, body = http_request("GET", url, timeout, headers=headers)
            return status, body
        parts = (split.hostname, split.port or 80, (split.path or "/") + ("?" + split.query if split.query else ""))
    hostname, port, target = parts
    host = url_host(hostname) + ("" if port == 80 else ":%d" % port)
    return _exchange(_tcp_connect(hostname, port, timeout), host, target, headers)


def urlsplit(url):
    """urllib.parse.urlsplit, imported when first needed (see the module's note)."""
    from urllib.parse import urlsplit as split  # pylint: disable=import-outside-toplevel
    return split(url)


def quote(text, safe="/"):
    """urllib.parse.quote of ``text`` (a str): percent-encoded UTF-8 but for letters, digits,
    ``_.-~`` and ``safe``; written out here so that a read of the box needs no urllib.parse."""
    return "".join(char if char in _UNRESERVED or char in safe else "".join("%%%02X" % byte for byte in char.encode("utf-8"))
                   for char in text)


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")
_PORT_DIGITS = frozenset("0123456789")


def plain_http(url):
    """(hostname, port, target) of a plain ``http://HOST[:PORT][/PATH][?QUERY][#FRAGMENT]`` URL as
    urlsplit reads it: the host lowercased, an IPv6 literal without its brackets, the port 80 when
    none is given, the target ``PATH?QUERY`` (``/`` for an empty path), the fragment dropped. None
    for any other URL (another scheme, userinfo, a port that is not 1 to 65535, an empty host,
    blanks or control characters), which the caller leaves to urlsplit."""
    if url[:7].lower() != "http://" or any(char <= " " for char in url):
        return None
    rest = url[7:].partition("#")[0]
    rest, dummy, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "@" in authority or not authority:
        return None
    if authority.startswith("["):
        hostname, bracket, port = authority[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return None
        port = port[1:]
    else:
        hostname, dummy, port = authority.partition(":")
        if ":" in port:
            return None
    if not hostname or (port and not (set(port) <= _PORT_DIGITS and 0 < int(port) < 65536)):
        return None
    return hostname.lower(), int(port) if port else 80, (slash + path or "/") + ("?" + query if query else "")


def _tcp_connect(hostname, port, timeout):
    """A stream socket of ``_socket`` connected to ``hostname``:``port``, each address getaddrinfo
    gives tried in turn (socket.create_connection's way); the last failure raised. An ASCII name
    goes as bytes, which spares the IDNA codec's import; an empty one (None, as urlsplit reads
    ``http://:8020``) is the loopback address, as getaddrinfo takes it."""
    name = hostname.encode("ascii") if hostname and hostname.isascii() else hostname
    failure = None
    for family, kind, proto, dummy, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    raise failure or OSError("no address for %s" % hostname)


class _Received(io.RawIOBase):
    """What a connected ``_socket`` socket receives, as a raw stream for io.BufferedReader (the file
    socket.socket.makefile("rb") gives)."""

    def __init__(self, sock):
        super(_Received, self).__init__()
        self._sock = sock

    def readable(self):
        return True

    def readinto(self, buffer):
        return self._sock.recv_into(buffer)


def wait_for_listener(url, seconds, clock=None, sleep=None):
    """Wait up to ``seconds`` for the host and port of ``url`` to accept a TCP connection (a server
    that starts in the same run); True once one did. Each try has at most a second."""
    import socket  # pylint: disable=import-outside-toplevel  # not on the box reader's way
    clock, sleep = clock or time.monotonic, sleep or time.sleep
    parts = urlsplit(url)
    address = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    deadline = clock() + seconds
    while True:
        try:
            socket.create_connection(address, max(0.1, min(1.0, deadline - clock()))).close()
            return True
        except OSError:
            if clock() >= deadline:
                return False
            sleep(0.2)


def unix_connect(socket_path, timeout):
    """A socket.socket connected to the unix socket ``socket_path``, with ``timeout`` (its
    makefile and shutdown for a caller that streams, as image_load's)."""
    import socket  # pylint: disable=import-outside-toplevel  # not on the box reader's way
    return _unix_connect(socket, socket_path, timeout)


def _unix_connect(module, socket_path, timeout):
    sock = module.socket(module.AF_UNIX, module.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(socket_path)
    except (OSError, ValueError):
        sock.close()
        raise
    return sock


def unix_get(socket_path, path, timeout, headers=None):
    """GET ``path`` from the HTTP service on the unix socket ``socket_path`` (the Docker engine's):
    (status, body), failures as http_get's."""
    return _exchange(_unix_connect(_socket, socket_path, timeout), "localhost", path, headers)


def _exchange(sock, host, path, headers):
    """Send one GET on the connected ``sock`` and read its answer; the socket is closed after."""
    lines = ["GET %s HTTP/1.1" % path, "Host: %s" % host, "Connection: close", "Accept-Encoding: identity"]
    lines += ["%s: %s" % (name, value) for name, value in (headers or {}).items()]
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        with io.BufferedReader(_Received(sock)) as stream:
            return read_answer(stream)
    finally:
        sock.close()


def read_answer(stream):
    """(status, body) of the HTTP/1.x answer to a GET on ``stream`` (a binary file): interim 1xx
    answers passed over, the body dechunked or read to its length or to the end."""
    while True:
        status, fields = _read_head(stream)
        if not 100 <= status < 200:
            break
    if status in (204, 304):
        return status, b""
    if "chunked" in fields.get("transfer-encoding", "").lower():
        return status, _read_chunks(stream)
    if "content-length" in fields:
        try:
            length = int(fields["content-length"].split(",")[0])
        except ValueError:
            raise BadAnswer("a Content-Length that is not a number: %r" % fields["content-length"][:40])
        body = stream.read(length)
        if len(body) < length:
            raise BadAnswer("the answer was cut short: %d of %d bytes" % (len(body), length))
        return status, body
    return status, stream.read()


def _line(stream):
    line = stream.readline(LINE_LIMIT + 1)
    if len(line) > LINE_LIMIT:
        raise BadAnswer("a line of the answer is longer than %d bytes" % LINE_LIMIT)
    return line


def _read_head(stream):
    line = _line(stream)
    words = line.decode("latin-1").split(None, 2)
    if len(words) < 2 or not words[0].startswith("HTTP/") or not words[1].isdigit():
        raise BadAnswer("not an HTTP answer: %r" % line[:80] if line else "the connection closed without an answer")
    fields = {}
    for dummy in range(HEADER_LIMIT + 1):
        line = _line(stream)
        if line in (b"\r\n", b"\n", b""):
            return int(words[1]), fields
        name, colon, value = line.decode("latin-1").partition(":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    raise BadAnswer("more than %d header lines" % HEADER_LIMIT)


def _read_chunks(stream):
    parts = []
    while True:
        size_line = _line(stream)
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError:
            raise BadAnswer("a chunk size that is not a number: %r" % size_line[:40])
        if size == 0:
            while _line(stream) not in (b"\r\n", b"\n", b""):  # the trailer, if any
                pass
            return b"".join(parts)
        chunk = stream.read(size)
        if len(chunk) < size:
            raise BadAnswer("the answer was cut short inside a chunk")
        parts.append(chunk)
        stream.readline(LINE_LIMIT)  # the chunk's closing CRLF


def http_request(method, url, timeout, body=None, headers=None, verify=False):
    """``method`` url with ``body`` (bytes) straight from the box, as http_get; ``verify`` checks an
    https URL's certificate and name. Returns (status, reason, body) whatever the status; a failed
    connection raises (OSError, http.client.HTTPException); a body cut short raises
    http.client.IncompleteRead with the answer's ``status`` set on it."""
    import http.client as http_client  # pylint: disable=import-outside-toplevel  # http_get's way needs none
    parts = urlsplit(url)
    if parts.scheme == "https":
        import ssl  # pylint: disable=import-outside-toplevel  # only for an https URL
        context = ssl.create_default_context()
        if not verify:
            context.check_hostname = False  # the box's own service, often a self-signed certificate
            context.verify_mode = ssl.CERT_NONE
        conn = http_client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout, context=context)
    elif parts.scheme == "http":
        conn = http_client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    else:
        raise ValueError("not an http(s) URL: %s" % url)
    try:
        conn.request(method, (parts.path or "/") + ("?" + parts.query if parts.query else ""), body=body,
                     headers=headers or {})
        resp = conn.getresponse()
        try:
            return resp.status, resp.reason, resp.read()
        except http_client.IncompleteRead as cut:
            cut.status = resp.status
            raise
    finally:
        conn.close()
