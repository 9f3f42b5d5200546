# -*- coding: utf-8 -*-
"""The transfer's answers to what a Hub, a mirror or the disk may do wrong: a busy server (429/5xx,
Retry-After), a full disk while writing state or a file, offline mode, a branch with no commit,
refusals (403, a missing file), a token no header can carry, bodies longer than the listing or
compressed despite the identity request. Each runs on both paths where both exist: a real HTTP
server on loopback read with http.client, and a stand-in of huggingface_hub's session for HTTPS."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import email.utils
import errno
import gzip
import hashlib
import json
import os
import re
import random
import threading
import time
import zlib

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_transfer

COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
REPO = "owner/model"
MIB = 1024 * 1024
TOKEN = "hf_SeCrEtToKeN"


def payload(size, seed=3):
    return random.Random(seed).getrandbits(8 * size).to_bytes(size, "little") if size else b""


def spec_for(path, data):
    return {"path": path, "size": len(data), "kind": "lfs", "digest": hashlib.sha256(data).hexdigest()}


def entries_for(files):
    return [{"type": "file", "path": path, "size": len(data), "oid": "0" * 40,
             "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}}
            for path, data in sorted(files.items())]


def encode(step, body):
    """A body as a server that ignores ``Accept-Encoding: identity`` sends it."""
    if step == "gzip":
        return gzip.compress(body), {"Content-Encoding": "gzip"}
    if step == "deflate":
        return zlib.compress(body), {"Content-Encoding": "deflate"}
    if step == "raw-deflate":
        packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        return packer.compress(body) + packer.flush(), {"Content-Encoding": "deflate"}
    if step == "br":
        return body, {"Content-Encoding": "br"}
    if step == "long":
        return body + b"XXXXX", {}
    return body, {}


class Origin:
    """What both stand-ins serve: ``files`` with Range (unless ``ignore_range``), after the
    ``script`` steps, one per request: ``(status, headers)`` answers that error, "gzip" /
    "deflate" / "raw-deflate" / "br" / "long" shape the body, "corrupt" flips a byte."""

    def __init__(self):
        self.files = {}
        self.script = []
        self.always = None
        self.ignore_range = False
        self.content_range = True  # False: 206 and 416 answers name no size
        self.seen = []
        self.lock = threading.Lock()
        # The Hub's resolve answers 302 to its CDN (another origin, as cas-bridge.xethub.hf.co or an
        # S3 signed link are), which serves the bytes after the ``script``; ``redirects`` counts them.
        self.cdn = False
        self.redirects = 0
        self.range_from = None  # 0: a Range is answered 206 with the whole body (Content-Range from 0)

    def answer(self, path, headers, host="hub"):
        with self.lock:
            self.seen.append({"path": path, "range": headers.get("Range"), "auth": headers.get("Authorization"),
                              "host": host})
            step = self.script.pop(0) if self.script else self.always
        if step == "drop":  # the connection closes before any answer (a reset, a refused or timed-out one)
            return None, {}, b""
        if isinstance(step, tuple):
            status, extra = step[0], step[1]
            body = step[2] if len(step) > 2 else json.dumps({"error": "x"}).encode()
            return status, dict({"Content-Type": "application/json"}, **extra), body
        body = self.files[path]
        start = 0
        if headers.get("Range") and not self.ignore_range:
            start = int(headers["Range"][len("bytes="):-1])
        if start and start >= len(body):  # a range past the end: 416 naming the size (RFC 9110)
            return 416, ({"Content-Range": "bytes */%d" % len(body)} if self.content_range else {}), b""
        data = body[start:]
        if step == "corrupt" and data:
            data = data[:-1] + bytes([data[-1] ^ 1])
        data, extra = encode(step, data)
        if step in ("cut", "short"):
            # "cut": the connection breaks half-way through the body; "short": a body without
            # Content-Length (delimited by the connection's close) ends half-way, with no error.
            extra = dict(extra, _end=step, _half=str(max(len(data) // 2, 1)))
        if start and not step and self.content_range:
            extra = dict(extra, **{"Content-Range": "bytes %d-%d/%d" % (start, len(body) - 1, len(body))})
        if headers.get("Range") and self.range_from == 0:  # a 206 that starts elsewhere than asked
            data, extra = body, {"Content-Range": "bytes 0-%d/%d" % (len(body) - 1, len(body))}
            return 206, extra, data
        return (206 if start else 200), extra, data


class PlainServer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    origin = None

    def log_message(self, *args):
        return

    cdn_port = 0  # the CDN's server (same handler, another port: another origin), set once it listens

    def do_GET(self):
        if self.path.startswith("/cdn/"):
            path = self.path[len("/cdn/"):].split("?", 1)[0]
            status, headers, body = self.origin.answer(path, self.headers, host="cdn")
        elif self.origin.cdn:
            path = self.path.split("/resolve/%s/" % COMMIT, 1)[1]
            with self.origin.lock:
                self.origin.seen.append({"path": path, "range": self.headers.get("Range"),
                                         "auth": self.headers.get("Authorization"), "host": "hub"})
                self.origin.redirects += 1
            status, headers, body = 302, {"Location": "http://127.0.0.1:%d/cdn/%s?X-Amz-Signature=s1gn%d" % (
                self.cdn_port, path, self.origin.redirects)}, b""
        else:
            path = self.path.split("/resolve/%s/" % COMMIT, 1)[1]
            status, headers, body = self.origin.answer(path, self.headers)
        if status is None:
            self.close_connection = True
            return
        end, half = headers.pop("_end", None), int(headers.pop("_half", 0))
        self.send_response(status)
        if end == "short":
            headers["Connection"] = "close"
        else:
            headers["Content-Length"] = str(len(body))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if end:
            self.wfile.write(body[:half])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


class SessionResponse:
    def __init__(self, status, headers, body, url=None):
        if status is None:
            raise ConnectionResetError("Server disconnected without sending a response.")
        self.status_code = status
        self.headers = headers
        self._body = body
        self.url = url  # the last request's, once redirects were followed (httpx's Response.url)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def iter_raw(self):
        end, half = self.headers.pop("_end", None), int(self.headers.pop("_half", 0))
        body = self._body[:half] if end else self._body
        for start in range(0, len(body), 65536):
            yield body[start:start + 65536]
        if end == "cut":
            raise ConnectionResetError("the peer reset the connection")  # as httpx raises ReadError

    def iter_bytes(self):  # the session decodes what it can, as httpx does
        coding = self.headers.get("Content-Encoding")
        body = {"gzip": gzip.decompress, "deflate": zlib.decompress}.get(coding, lambda b: b)(self._body)
        for start in range(0, len(body), 65536):
            yield body[start:start + 65536]


class Hub:
    """huggingface_hub's module, utils, session and API in one object (the session path)."""

    def __init__(self, origin, sha=COMMIT, raises=None):
        self.origin = origin
        self.sha = sha
        self.raises = raises

    @staticmethod
    def hf_hub_url(repo_id, path, revision, endpoint):
        return "%s/%s/resolve/%s/%s" % (endpoint, repo_id, revision, path)

    @staticmethod
    def build_hf_headers(token):
        return {"Authorization": "Bearer %s" % token} if token else {}

    def get_session(self):
        return self

    def stream(self, method, url, headers, timeout):
        if self.raises is not None:
            raise self.raises
        path = url.split("/resolve/%s/" % COMMIT, 1)[1]
        if self.origin.cdn:  # the session follows the redirect, without the token on the other origin
            with self.origin.lock:
                self.origin.redirects += 1
            self.origin.seen.append({"path": path, "range": headers.get("Range"), "auth": headers.get("Authorization"),
                                     "host": "hub"})
            headers = dict((k, v) for k, v in headers.items() if k.lower() != "authorization")
            url = "https://cdn-lfs.hf.invalid/cdn/%s?X-Amz-Signature=s1gn%d" % (path, self.origin.redirects)
            return SessionResponse(*self.origin.answer(path, headers, host="cdn"), url=url)
        return SessionResponse(*self.origin.answer(path, headers), url=url)

    def model_info(self, repo_id, revision):
        self.origin.seen.append({"path": "model_info", "range": None, "auth": None})
        return type("Info", (), {"sha": self.sha})()

    def list_repo_tree(self, *args, **kwargs):
        raise AssertionError("the listing is given in these tests")


@pytest.fixture
def origin():
    return Origin()


@pytest.fixture
def plain_server(origin, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    handler = type("Handler", (PlainServer,), {"origin": origin})
    servers = []
    for dummy in range(2):  # the Hub, then its CDN
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.daemon = True
        thread.start()
        servers.append((server, thread))
    handler.cdn_port = servers[1][0].server_port
    yield servers[0][0]
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def pauses(monkeypatch):
    waited = []
    monkeypatch.setattr(hf_transfer, "busy_sleep", waited.append)
    return waited


@pytest.fixture
def builder(request, origin, tmp_path, monkeypatch):
    """``build(path, files)``: a Snapshot of ``files`` over the plain or the session path, into
    ``tmp_path/folder``; the listing is given (no Hub request)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    def build(path, files, token=TOKEN, revision=COMMIT, hub=None, folder="", **kwargs):
        origin.files = files
        if path == "plain":
            server = request.getfixturevalue("plain_server")
            endpoint = "http://127.0.0.1:%d" % server.server_port
        else:
            endpoint = "https://hub.invalid"
        snap = hf_transfer.Snapshot(REPO, revision, str(tmp_path / folder / "model"), str(tmp_path / folder / "state"),
                                    token=token, endpoint=endpoint, chunk_size=MIB,
                                    listing={"repo_id": REPO, "commit": COMMIT, "entries": entries_for(files)},
                                    **kwargs)
        hub = hub or Hub(origin)
        if path == "plain":
            def no_session():
                raise AssertionError("plain HTTP goes without the session")
            hub.get_session = no_session
        snap._hub = (hub, hub, hub)
        return snap

    return build


@pytest.fixture(params=["plain", "session"])
def make(request, builder):
    """``builder`` on the parametrized path."""

    def build(files, **kwargs):
        return builder(request.param, files, **kwargs)

    build.path = request.param
    return build


def requests_for(origin, path):
    return [seen for seen in origin.seen if seen["path"] == path]


# --- 1. a busy server: 429 and 5xx are asked again after a pause --------------------------------

@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_a_busy_answer_is_asked_again_after_a_pause_on_both_paths(make, origin, pauses, status):
    data = payload(MIB + 77)
    origin.script = [(status, {})]
    result = make({"model.safetensors": data}).run()
    assert result["verified"] and result["downloaded_bytes"] == len(data)
    assert pauses == [hf_plan.BACKOFF_S]
    assert len(requests_for(origin, "model.safetensors")) == 2


def test_retry_after_in_seconds_and_as_an_http_date_is_followed_and_capped(make, origin, pauses):
    data = payload(5000)
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    origin.script = [(429, {"Retry-After": "7"}), (503, {"Retry-After": soon}), (429, {"Retry-After": "86400"})]
    result = make({"model.safetensors": data}).run()
    assert result["verified"]
    assert pauses[0] == 7.0 and 28 <= pauses[1] <= 30
    assert pauses[2] == hf_plan.RETRY_AFTER_CAP_S  # a day asked, 60 s waited


def test_a_server_that_stays_busy_fails_after_a_bounded_wait(make, origin, pauses):
    origin.always = (503, {})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(5000)}).run()
    assert caught.value.code == "E_DOWNLOAD" and "HTTP 503" in caught.value.what
    assert "%d attempts" % (hf_plan.BUSY_RETRIES + 1) in caught.value.what
    assert pauses == [2.0, 4.0, 8.0]
    assert len(requests_for(origin, "model.safetensors")) == hf_plan.BUSY_RETRIES + 1


def test_the_pauses_follow_retry_after_within_their_caps():
    now = 1000000000.0
    assert hf_plan.retry_after_seconds("120", now) == 120.0
    assert hf_plan.retry_after_seconds(email.utils.formatdate(now + 42, usegmt=True), now) == 42.0
    assert hf_plan.retry_after_seconds(email.utils.formatdate(now - 42, usegmt=True), now) == 0.0
    assert hf_plan.retry_after_seconds("soon", now) is None and hf_plan.retry_after_seconds(None, now) is None
    assert [hf_plan.busy_pause(n, None, 0) for n in range(4)] == [2.0, 4.0, 8.0, None]
    assert hf_plan.busy_pause(0, 3600.0, 0) == hf_plan.RETRY_AFTER_CAP_S
    assert hf_plan.busy_pause(2, 60.0, hf_plan.BUSY_WAIT_S - 59) is None  # past the file's total wait


# --- 2 and 3. a full disk -------------------------------------------------------------------------

class FullDisk:
    """open() of the transfer's module: files under ``under`` fail their first write, as on a
    full filesystem (the write names no file)."""

    def __init__(self, under, err=errno.ENOSPC):
        self.under = under
        self.err = err

    def __call__(self, path, *args, **kwargs):
        handle = open(path, *args, **kwargs)  # pylint: disable=consider-using-with
        if not str(path).startswith(self.under):
            return handle
        err = self.err

        class Full:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()
                return False

            def write(self, text):
                raise OSError(err, os.strerror(err))

        return Full()


@pytest.mark.parametrize("err,code", [(errno.ENOSPC, "E_DISK"), (errno.EDQUOT, "E_DISK"), (errno.EIO, "E_DOWNLOAD")])
def test_a_state_write_that_fails_is_coded_with_its_path(make, monkeypatch, tmp_path, err, code):
    snap = make({"model.safetensors": payload(5000)})
    monkeypatch.setattr(hf_transfer, "open", FullDisk(str(tmp_path / "state"), err), raising=False)
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == code
    assert "listing-%s.json" % COMMIT in caught.value.what and str(tmp_path / "state") in caught.value.what
    assert os.strerror(err) in caught.value.what
    assert not [name for name in os.listdir(str(tmp_path / "state")) if name.endswith(".tmp")]


def test_the_space_check_comes_before_any_state_is_written(make, monkeypatch, tmp_path, origin):
    snap = make({"model.safetensors": payload(5000)})
    monkeypatch.setattr(hf_transfer, "free_bytes", lambda path: 10)
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_DISK" and "is free" in caught.value.what
    assert os.listdir(str(tmp_path / "state")) == [] and origin.seen == []


def test_a_progress_file_on_a_full_disk_does_not_hide_the_runs_failure(monkeypatch, tmp_path):
    monkeypatch.setattr(hf_transfer, "open", FullDisk(str(tmp_path)), raising=False)
    progress = hf_transfer.Progress(str(tmp_path / "progress.json"), 10)
    progress.add(5, force=True)
    progress.finish({"failed": "E_DISK"})  # no exception: the operator's eyes only


@pytest.mark.parametrize("err,code", [(errno.ENOSPC, "E_DISK"), (errno.EDQUOT, "E_DISK"), (errno.EIO, "E_DOWNLOAD")])
def test_a_disk_that_fills_mid_file_is_not_a_network_failure(make, monkeypatch, origin, tmp_path, pauses, err, code):
    data = payload(3 * MIB + 5)
    snap = make({"model.safetensors": data})
    real = hf_transfer.write_all
    written = []

    def write_all(fd, piece):
        if sum(written) >= 3 * MIB // 2:
            raise OSError(err, os.strerror(err))
        written.append(real(fd, piece))
        return written[-1]
    monkeypatch.setattr(hf_transfer, "write_all", write_all)
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == code and os.strerror(err) in caught.value.what
    assert "model.safetensors" in caught.value.what and snap.partial_dir in caught.value.what
    assert len(requests_for(origin, "model.safetensors")) == 1 and pauses == []  # no retry
    assert "rerun to resume" not in caught.value.what
    # What was committed stays for the rerun, unverified.
    part, rec = snap._partial_paths(COMMIT, spec_for("model.safetensors", data))
    assert json.load(open(rec))["committed"] >= MIB and os.path.exists(part)
    assert not os.path.exists(os.path.join(snap.local_dir, "model.safetensors"))


# --- 4. offline mode ------------------------------------------------------------------------------

def test_offline_mode_refuses_before_any_request_what_is_missing_and_passes_a_complete_copy(
        make, monkeypatch, origin):
    files = {"model.safetensors": payload(5000)}
    snap = make(files)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_SETTINGS"
    assert "offline mode (HF_HUB_OFFLINE) is set" in caught.value.what and "rerun" not in caught.value.what
    assert origin.seen == [] and snap.hub_requests == 0
    # A complete, verified copy (a bundle's, an earlier download) still passes offline, with no request.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert make(files).run()["verified"]
    del origin.seen[:]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = make(files).run()
    assert again["verified"] and again["download_files"] == [] and origin.seen == []


def test_offline_mode_refuses_a_listing_or_a_branch_it_would_have_to_ask_for(make, monkeypatch, origin):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snap = make({"model.safetensors": payload(50)})
    snap.given_listing = None
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_SETTINGS" and "listing" in caught.value.what
    assert "HF_HUB_OFFLINE" in caught.value.what
    snap = make({"model.safetensors": payload(50)}, revision="main", allow_unpinned=True)
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_SETTINGS" and "HF_HUB_OFFLINE" in caught.value.what
    assert origin.seen == []


def test_the_librarys_offline_refusal_is_not_a_rerun(builder, origin):
    error = type("OfflineModeIsEnabled", (ConnectionError,), {})
    # The library's session only: on the plain path the refusal before the request covers it.
    snap = builder("session", {"model.safetensors": payload(50)}, hub=Hub(origin, raises=error("offline")))
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_SETTINGS" and "HF_HUB_OFFLINE" in caught.value.what
    assert "rerun" not in caught.value.what


def test_offline_mode_is_read_as_the_library_reads_it():
    assert hf_plan.offline_mode({"HF_HUB_OFFLINE": "1"}) and hf_plan.offline_mode({"HF_HUB_OFFLINE": "yes"})
    assert hf_plan.offline_mode({"TRANSFORMERS_OFFLINE": "TRUE"})
    assert not hf_plan.offline_mode({}) and not hf_plan.offline_mode({"HF_HUB_OFFLINE": "0"})


# --- 5. a branch that resolves to no commit ------------------------------------------------------

@pytest.mark.parametrize("sha", [None, "", "main", COMMIT[:12], COMMIT + "0", "g" * 40])
def test_a_branch_that_resolves_to_no_commit_is_refused(make, origin, tmp_path, sha):
    snap = make({"model.safetensors": payload(50)}, revision="main", allow_unpinned=True, hub=Hub(origin, sha=sha))
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_SETTINGS" and "40-hex" in caught.value.what
    assert os.listdir(str(tmp_path / "state")) == []


def test_a_branch_that_resolves_to_a_commit_is_taken(make, origin):
    snap = make({"model.safetensors": payload(50)}, revision="main", allow_unpinned=True,
                hub=Hub(origin, sha=COMMIT.upper()))
    assert snap.run()["revision"] == COMMIT


# --- 6 and 10. refusals and missing files ---------------------------------------------------------

def test_a_403_without_gatedrepo_is_a_plain_refusal_and_gatedrepo_names_the_page(make, origin):
    origin.script = [(403, {})]
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(50)}).run()
    assert caught.value.code == "E_DOWNLOAD" and "access to model.safetensors denied (HTTP 403)" in caught.value.what
    assert "terms" not in caught.value.what
    origin.script = [(403, {"X-Error-Code": "GatedRepo"})]
    snap = make({"model.safetensors": payload(50)})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_HF_TOKEN" and "open its page, accept, retry" in caught.value.what
    assert "%s/%s" % (snap.endpoint, REPO) in caught.value.what


def test_a_file_missing_at_the_revision_is_no_rerun(make, origin, pauses):
    origin.script = [(404, {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"})]
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"config.json": b"{}\n"}).run()
    assert caught.value.code == "E_SETTINGS" and "no file config.json at revision %s" % COMMIT in caught.value.what
    assert "rerun" not in caught.value.what and pauses == []


@pytest.mark.parametrize("token", [u"hf_t\u00f6k\u00e9n", "hf_a\r\nX-Injected: 1", "hf_\x00nul", u"hf_\u2603"])
def test_a_token_no_header_can_carry_is_refused_without_a_request_and_never_shown(make, origin, token):
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(50)}, token=token).run()
    assert caught.value.code == "E_HF_TOKEN" and hf_plan.MSG_TOKEN_HEADER in caught.value.what
    assert token not in caught.value.what and "hf_" not in caught.value.what
    assert origin.seen == []


def test_a_header_error_of_the_library_is_a_token_error_that_does_not_quote_it(tmp_path):
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "m"), str(tmp_path / "s"), token=TOKEN)
    for name in ("LocalProtocolError", "UnicodeEncodeError"):
        exc = type(name, (Exception,), {})("Illegal header value b'Bearer %s'" % TOKEN)
        err = snap._classify(exc)
        assert err.code == "E_HF_TOKEN" and TOKEN not in err.what and not getattr(err, "transient", False)
    assert hf_plan.token_header_problem("hf_sp ace") is None and hf_plan.token_header_problem(None) is None


# --- 7, 8 and 9. bodies ---------------------------------------------------------------------------

def test_a_download_with_a_wrong_checksum_is_fetched_twice_as_the_message_says(make, origin):
    origin.always = "corrupt"
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(5000)}).run()
    assert "wrong checksum twice" in caught.value.what
    assert len(requests_for(origin, "model.safetensors")) == 2


@pytest.mark.parametrize("content_range", [True, False], ids=["sized", "unsized"])
def test_a_file_the_server_has_shorter_than_the_listing_is_never_resumed_for_ever(make, origin, pauses, content_range):
    # The endpoint serves another file than the listing's (a mirror of another revision): a run
    # may end short of the listing's size, and then the resume asks past the server's end (416).
    origin.content_range = content_range
    data = payload(2 * MIB + 11)
    said = []
    for run in range(4):
        snap = make({"model.safetensors": data})
        origin.files["model.safetensors"] = data[:2 * MIB]
        with pytest.raises(hf_transfer.SnapshotError) as caught:
            snap.run()
        said.append(caught.value.what)
        if "ended at" in said[-1]:  # no length known up front (the session stand-in sends none)
            assert "ended at 2097152 of 2097163 bytes; rerun to resume" in said[-1]
            continue
        sized = "has 2097152 bytes" if content_range or snap.endpoint.startswith("http:") else None
        assert "the server %s of model.safetensors where the listing gives 2097163" % (
            sized or "refuses a resume at byte 2097152") in said[-1], said
        assert "rerun" not in said[-1] and not os.listdir(snap.partial_dir)  # the next run starts over
    assert not any("ended at" in one and "ended at" in then for one, then in zip(said, said[1:]))
    assert pauses == []


@pytest.mark.parametrize("status,headers,size", [
    (200, {"Content-Length": "2048"}, 2048),
    (200, {"Content-Length": "2048", "Content-Encoding": "gzip"}, None),  # the encoded length
    (200, {}, None),
    (206, {"Content-Range": "bytes 1024-2047/2048"}, 2048),
    (206, {"Content-Range": "bytes 1024-2047/*"}, None),
    (416, {"Content-Range": "bytes */2048"}, 2048),
    (416, {}, None),
    (503, {"Content-Length": "12"}, None),
])
def test_the_size_an_answer_gives_for_the_whole_file(status, headers, size):
    assert hf_transfer.served_size(status, headers) == size


def test_a_body_longer_than_the_listing_says_so_without_rerun_advice(make, origin, pauses):
    origin.always = "long"
    snap = make({"config.json": b'{"a": 1}\n'})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.run()
    assert caught.value.code == "E_DOWNLOAD"
    # The plain path reads the length up front, the session stand-in sends none: both stop.
    assert re.search(r"(sent more bytes|has 14 bytes) of config.json where the listing gives 9", caught.value.what)
    assert "rerun" not in caught.value.what and "ended at" not in caught.value.what
    assert len(requests_for(origin, "config.json")) == 1
    assert not os.listdir(snap.partial_dir)  # bytes that are not the file's do not stay


@pytest.mark.parametrize("step", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_body_sent_despite_identity_is_decoded_on_both_paths_alike(builder, origin, step):
    files = {"config.json": b'{"a": 1}\n' * 3, "model.safetensors": payload(2 * MIB + 3)}
    origin.always = step
    paths = ["plain", "session"] if step != "raw-deflate" else ["plain"]  # the stand-in session decodes as httpx
    for path in paths:
        result = builder(path, files, folder=path).run()
        assert result["verified"] and result["downloaded_bytes"] == sum(len(data) for data in files.values())


def test_an_unknown_content_encoding_on_the_plain_path_is_refused_clearly(builder, origin):
    origin.always = "br"
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        builder("plain", {"config.json": b"{}\n"}).run()
    assert caught.value.code == "E_DOWNLOAD" and "Content-Encoding br" in caught.value.what


# --- cosmetic: a server that ignores Range --------------------------------------------------------

def leave_half(snap, data, spec):
    """The first MiB of ``data`` on disk as a killed run left it, its resume point recorded."""
    os.makedirs(snap.partial_dir)
    part, rec = snap._partial_paths(COMMIT, spec)
    with open(part, "wb") as handle:
        handle.write(data[:MIB])
    with open(rec, "w") as handle:
        json.dump({"path": spec["path"], "digest": spec["digest"], "size": spec["size"], "committed": MIB}, handle)


def test_progress_never_passes_its_total_when_a_server_ignores_range(make, origin, tmp_path):
    data = payload(2 * MIB + 9)
    spec = spec_for("model.safetensors", data)
    origin.ignore_range = True
    snap = make({"model.safetensors": data})
    leave_half(snap, data, spec)
    progress = tmp_path / "progress.json"
    snap.progress_file = str(progress)
    result = snap.run()
    assert result["verified"]
    line = json.load(open(str(progress)))
    assert line["done"] <= line["total"] and line["done"] == len(data)


# --- the Hub's API through the real huggingface_hub: busy answers, pages -----------------------

class HubApi(BaseHTTPRequestHandler):
    """The two API requests a download makes, in the Hub's shapes: a revision's commit and the
    tree's pages (``Link: <next>; rel="next"``). ``busy`` answers go first, one per request."""
    protocol_version = "HTTP/1.1"
    busy = []
    seen = []
    lfs_oid = "c" * 64
    link = "absolute"  # "relative": the next page's Link as a path (RFC 8288); "elsewhere": another origin

    def log_message(self, *args):
        return

    def send(self, status, body, headers=(), kind="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for key, value in list(headers) + [("Content-Type", kind), ("Content-Length", str(len(data)))]:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.busy:
            status, headers = self.busy.pop(0)
            if status is None:  # the connection closes with no answer
                self.close_connection = True
                return None
            if status == "page":  # a 200 that is no listing: a proxy's or a portal's page
                return self.send(200, b"<html><body>Please sign in to the network</body></html>", kind="text/html")
            return self.send(status, {"error": "busy"}, headers)
        if self.path == "/api/models/%s/revision/main" % REPO:
            return self.send(200, {"id": REPO, "sha": COMMIT})
        tree = "/api/models/%s/tree/%s" % (REPO, COMMIT)
        if self.path.startswith(tree + "?") and "cursor=2" not in self.path:
            port = self.server.server_port
            base = {"relative": "", "elsewhere": "http://localhost:%d" % port}.get(self.link, "http://127.0.0.1:%d" % port)
            return self.send(200, [{"type": "directory", "oid": "d", "size": 0, "path": "sub"},
                                   {"type": "file", "oid": "a" * 40, "size": 9, "path": "config.json"}],
                             [("Link", '<%s%s?recursive=true&cursor=2>; rel="next"' % (base, tree))])
        if self.path.startswith(tree + "?"):
            return self.send(200, [{"type": "file", "oid": "b" * 40, "size": 2048, "path": "sub/model.safetensors",
                                    "lfs": {"oid": self.lfs_oid, "size": 2048, "pointerSize": 134},
                                    "xetHash": self.lfs_oid}])
        return self.send(404, {"error": "Not Found"})


@pytest.fixture
def hub_api(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    handler = type("Handler", (HubApi,), {"busy": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    yield handler, "http://127.0.0.1:%d" % server.server_port
    server.shutdown()
    server.server_close()
    thread.join(5)


def hub_snapshot(tmp_path, endpoint):
    pytest.importorskip("huggingface_hub")
    os.makedirs(str(tmp_path / "state"))
    return hf_transfer.Snapshot(REPO, "main", str(tmp_path / "model"), str(tmp_path / "state"), token=TOKEN,
                                endpoint=endpoint, allow_unpinned=True)


def test_the_listing_follows_the_hubs_pages_and_keeps_files_only(tmp_path, hub_api, pauses):
    handler, endpoint = hub_api
    snap = hub_snapshot(tmp_path, endpoint)
    assert snap.resolve_commit() == COMMIT
    assert snap.listing(COMMIT) == [
        {"type": "file", "path": "config.json", "size": 9, "oid": "a" * 40},
        {"type": "file", "path": "sub/model.safetensors", "size": 2048, "oid": "b" * 40,
         "lfs": {"oid": "c" * 64, "size": 2048, "pointerSize": 134}}]
    assert [path.split("?")[0].rsplit("/", 2)[-2] for path, auth in handler.seen] == ["revision", "tree", "tree"]
    assert all(auth == "Bearer " + TOKEN for path, auth in handler.seen) and snap.hub_requests == 3


def test_busy_hub_api_answers_are_asked_again_within_the_files_caps(tmp_path, hub_api, pauses):
    # huggingface_hub's own listing would wait Retry-After + 1 s (an hour here), five times.
    handler, endpoint = hub_api
    handler.busy[:] = [(503, []), (429, [("Retry-After", "3600")])]
    snap = hub_snapshot(tmp_path, endpoint)
    assert snap.resolve_commit() == COMMIT  # model_info alone would fail at the first 503
    assert len(snap.listing(COMMIT)) == 2
    assert pauses == [hf_plan.BACKOFF_S, hf_plan.RETRY_AFTER_CAP_S]
    handler.busy[:] = [(429, [("Retry-After", "3600")])] * 5
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        hub_snapshot(tmp_path / "again", endpoint).listing(COMMIT)
    assert caught.value.code == "E_DOWNLOAD" and "(3 attempts, 120 s of pauses)" in caught.value.what
    assert pauses[2:] == [hf_plan.RETRY_AFTER_CAP_S] * 2 and len(handler.seen) == 5 + 3


# --- the Hub's redirect to its CDN: who answered decides what a refusal means --------------------

XML_EXPIRED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
               b'<Message>Request has expired</Message></Error>')


@pytest.mark.parametrize("status", [403, 404, 401, 400])
def test_a_cdn_refusal_asks_the_hub_for_a_fresh_link_and_is_no_hub_answer(make, origin, pauses, status):
    """The Hub answers /resolve/ with a 302 to its CDN (cas-bridge.xethub.hf.co, cdn-lfs, a signed S3
    link). The CDN's refusal (an expired signature: 403 with an XML body and none of the Hub's
    X-Error-* headers) is neither a token problem nor an unknown repository: the Hub is asked for a
    fresh link in the same run, and the token never reaches the CDN."""
    data = payload(MIB + 5)
    origin.cdn = True
    origin.script = [(status, {"Content-Type": "application/xml"}, XML_EXPIRED)]
    result = make({"model.safetensors": data}).run()
    assert result["verified"] and pauses == []
    hub = [seen for seen in origin.seen if seen["host"] == "hub"]
    cdn = [seen for seen in origin.seen if seen["host"] == "cdn"]
    assert len(hub) == 2 and len(cdn) == 2  # a fresh link for the second try
    assert all(seen["auth"] == "Bearer " + TOKEN for seen in hub)
    assert all(seen["auth"] is None for seen in cdn)


@pytest.mark.parametrize("status", [403, 404, 401])
def test_a_cdn_that_keeps_refusing_is_a_download_failure_naming_the_cdn_without_the_signature(
        make, origin, pauses, status):
    origin.cdn = True
    origin.always = (status, {"Content-Type": "application/xml"}, XML_EXPIRED)
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(50)}).run()
    err = caught.value
    assert err.code == "E_DOWNLOAD", err.what
    assert "HTTP %d" % status in err.what and "model.safetensors" in err.what
    assert ("127.0.0.1" if make.path == "plain" else "cdn-lfs.hf.invalid") in err.what
    assert "s1gn" not in err.what and "Signature" not in err.what and TOKEN not in err.what
    assert "no repository" not in err.what and "token" not in err.what
    assert origin.redirects == hf_transfer.TRANSIENT_RETRIES and pauses == []


def test_a_403_from_the_hub_itself_is_the_tokens_access_not_an_expired_link(make, origin, pauses):
    """A fine-grained token without "read access to public gated repos" (or to this repository) is
    refused by the Hub itself: 403 with its X-Error-Message and no GatedRepo code. A rerun cannot
    help; the token must change (huggingface_hub/issues/2844)."""
    message = "Please enable access to public gated repositories in your fine-grained token settings"
    origin.always = (403, {"X-Error-Message": message})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(50)}).run()
    assert caught.value.code == "E_HF_TOKEN" and message in caught.value.what
    assert "fine-grained" in caught.value.what and "rerun" not in caught.value.what
    assert len(requests_for(origin, "model.safetensors")) == 1


@pytest.mark.parametrize("status", [403, 451])
def test_a_disabled_repository_is_no_token_matter(status):
    code, what = hf_plan.classify_http_error(status, None, "Access to this resource is disabled.", REPO, COMMIT, True,
                                             path="model.safetensors")
    assert code == "E_SETTINGS" and "disabled" in what and "rerun" not in what


# --- connections that break, and bodies that end early ------------------------------------------

def test_a_connection_that_breaks_often_but_moves_on_is_resumed_until_the_file_is_whole(make, origin, pauses):
    """A CDN connection of a multi-GB file may break many times; huggingface_hub's http_get resumes
    as long as bytes keep arriving (its retry count starts again with each). Here every attempt
    brings half of what is left: more breaks than TRANSIENT_RETRIES, each with progress."""
    data = payload(16 * MIB + 3)
    origin.script = ["cut"] * (hf_transfer.TRANSIENT_RETRIES + 2)
    result = make({"model.safetensors": data}).run()
    assert result["verified"] and pauses == []
    ranges = [seen["range"] for seen in requests_for(origin, "model.safetensors")]
    assert len(ranges) == hf_transfer.TRANSIENT_RETRIES + 3 and ranges[0] is None
    assert all(rng.startswith("bytes=") for rng in ranges[1:])


def test_a_connection_that_breaks_with_little_progress_still_fails_after_its_attempts(make, origin, pauses):
    """Only an attempt that brought a piece (1 MiB) or more starts the count again: a server that
    breaks every connection after a few bytes is not asked for ever."""
    origin.always = "cut"
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(1000)}).run()
    assert caught.value.code == "E_DOWNLOAD" and "rerun to resume" in caught.value.what
    assert len(requests_for(origin, "model.safetensors")) == hf_transfer.TRANSIENT_RETRIES


def test_a_body_that_ends_early_without_an_error_is_resumed_in_the_same_run(make, origin, pauses):
    """A body delimited by the connection's close (no Content-Length, as a proxy may send it) that
    ends before the file's size is a cut connection, not a finished file: resumed at once."""
    data = payload(3 * MIB + 7)
    origin.script = ["short"]
    snap = make({"model.safetensors": data})
    result = snap.run()
    assert result["verified"] and pauses == []
    ranges = [seen["range"] for seen in requests_for(origin, "model.safetensors")]
    assert ranges == [None, "bytes=%d-" % (len(data) // 2)]
    assert snap.resumed and snap.resumed[0]["from"] == len(data) // 2


def test_a_listing_page_the_network_failed_is_asked_again_as_huggingface_hub_would(tmp_path, hub_api, pauses):
    """HfApi.list_repo_tree asks a page again after a timeout or a dropped connection (http_backoff);
    the listing's own page loop does too, within the same capped pauses as a busy answer."""
    handler, endpoint = hub_api
    snap = hub_snapshot(tmp_path, endpoint)
    handler.busy[:] = [(None, []), (None, [])]  # the first page's connection closes twice with no answer
    assert len(snap.listing(COMMIT)) == 2
    assert pauses == [hf_plan.BACKOFF_S, hf_plan.BACKOFF_S * 2]
    handler.busy[:] = [(None, [])] * 5
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        hub_snapshot(tmp_path / "again", endpoint).listing(COMMIT)
    assert caught.value.code == "E_DOWNLOAD" and "(4 attempts, 14 s of pauses)" in caught.value.what
    assert TOKEN not in caught.value.what


def test_a_connection_that_fails_before_any_byte_is_asked_again_after_a_pause(make, origin, pauses):
    data = payload(MIB + 11)
    origin.script = ["drop", "drop"]
    assert make({"model.safetensors": data}).run()["verified"]
    assert pauses == [hf_plan.BACKOFF_S, hf_plan.BACKOFF_S * 2]
    assert len(requests_for(origin, "model.safetensors")) == 3
    del origin.seen[:], pauses[:]
    origin.script = ["drop", (503, {})]  # the busy answer's own pause, once: no second wait before the next
    assert make({"model.safetensors": data}, folder="again").run()["verified"]
    assert pauses == [hf_plan.BACKOFF_S, hf_plan.BACKOFF_S]


# --- the Hub's rate limit headers -----------------------------------------------------------------

RATELIMIT = {"RateLimit": '"resolvers";r=0;t=45', "RateLimit-Policy": '"fixed window";"resolvers";q=3000;w=300'}


def test_a_rate_limit_answer_waits_for_the_window_its_ratelimit_header_names(make, origin, pauses):
    """The Hub's 429 names when its window resets in ``RateLimit: "KIND";r=0;t=SECONDS`` (the IETF
    draft); huggingface_hub's http_backoff waits that long, before Retry-After. Backing off 2, 4 and
    8 s would spend every attempt inside the window."""
    data = payload(3000)
    origin.script = [(429, dict(RATELIMIT))]
    assert make({"model.safetensors": data}).run()["verified"]
    assert pauses == [45.0]


def test_the_ratelimit_header_counts_only_when_nothing_remains():
    assert hf_plan.ratelimit_reset_seconds('"api";r=0;t=55') == 55.0
    assert hf_plan.ratelimit_reset_seconds(' "resolvers" ; r = 0 ; t = 7') == 7.0
    for value in ('"api";r=12;t=55', "", None, "garbage", '"api";t=55'):
        assert hf_plan.ratelimit_reset_seconds(value) is None


def test_a_request_timeout_answer_is_asked_again_as_the_library_does(make, origin, pauses):
    # huggingface_hub asks a 408 again, in http_get as in http_backoff.
    origin.script = [(408, {})]
    assert make({"model.safetensors": payload(3000)}).run()["verified"]
    assert pauses == [hf_plan.BACKOFF_S]


# --- a listing whose checksums the Hub redacted -----------------------------------------------------

def test_a_listing_with_redacted_checksums_is_refused_and_never_recorded(tmp_path, hub_api, pauses):
    """The Hub masks a file's hashes ("*" * 64) where the caller may not read them (huggingface_hub
    #4595 keeps such a listing out of its tree cache). A pinned commit's listing is recorded for
    good: one with masked digests would fail every later download's checksum, even once the token
    may read the repository."""
    handler, endpoint = hub_api
    handler.lfs_oid = "*" * 64
    snap = hub_snapshot(tmp_path, endpoint)
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.listing(COMMIT)
    assert caught.value.code == "E_HF_TOKEN" and "sub/model.safetensors" in caught.value.what
    assert not os.path.exists(str(tmp_path / "state" / ("listing-%s.json" % COMMIT)))
    handler.lfs_oid = "c" * 64  # the terms accepted: the next run asks again and records it
    assert len(snap.listing(COMMIT)) == 2
    assert os.path.exists(str(tmp_path / "state" / ("listing-%s.json" % COMMIT)))


def test_a_recorded_listing_with_redacted_checksums_is_asked_again(tmp_path, hub_api, pauses):
    handler, endpoint = hub_api
    snap = hub_snapshot(tmp_path, endpoint)
    with open(str(tmp_path / "state" / ("listing-%s.json" % COMMIT)), "w") as handle:
        json.dump({"repo_id": REPO, "commit": COMMIT, "entries": [
            {"type": "file", "path": "m.safetensors", "size": 9, "oid": "b" * 40,
             "lfs": {"oid": "*" * 64, "size": 9, "pointerSize": 134}}]}, handle)
    assert [e["path"] for e in snap.listing(COMMIT)] == ["config.json", "sub/model.safetensors"]


def test_a_redirect_loop_is_named_without_the_signed_links_query(builder, origin):
    """A signed CDN link carries its credentials in the query (X-Amz-Signature, X-Amz-Security-Token
    of a temporary key): a failure may name the host and path, never the query."""
    origin.cdn = True
    origin.always = (302, {"Location": "/cdn/model.safetensors?X-Amz-Security-Token=TeMpKeY&X-Amz-Signature=s1gn"})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        builder("plain", {"model.safetensors": payload(50)}).run()
    assert caught.value.code == "E_DOWNLOAD" and "redirects" in caught.value.what
    assert "/cdn/model.safetensors" in caught.value.what
    assert "TeMpKeY" not in caught.value.what and "s1gn" not in caught.value.what


# --- a 206 that does not start where the Range asked -------------------------------------------

def test_a_partial_answer_from_another_byte_than_asked_is_written_where_it_starts(make, origin, pauses):
    """Content-Range says where a 206's bytes start (RFC 9110 14.4); a server may answer a resume
    with another range than asked (here the whole file). Appended at the resume point they would
    make a wrong file, fetched a second time whole; written where they start, one request does."""
    data = payload(2 * MIB + 9)
    spec = spec_for("model.safetensors", data)
    origin.range_from = 0
    snap = make({"model.safetensors": data})
    leave_half(snap, data, spec)
    result = snap.run()
    assert result["verified"] and result["corrupted"] == []
    assert [seen["range"] for seen in requests_for(origin, "model.safetensors")] == ["bytes=%d-" % MIB]


def test_an_answer_that_is_no_file_is_never_written_as_one(make, origin, pauses):
    # A 3xx with no Location (or a 204, a 304) carries no file bytes: an error naming its status.
    origin.always = (302, {})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(5000)}).run()
    assert caught.value.code == "E_DOWNLOAD" and "HTTP 302" in caught.value.what


@pytest.mark.parametrize("answer", ["page", "object"])
def test_a_listing_page_that_is_no_listing_says_so(tmp_path, hub_api, pauses, answer):
    handler, endpoint = hub_api
    snap = hub_snapshot(tmp_path, endpoint)
    handler.busy[:] = [("page", [])] if answer == "page" else [(200, [])]  # {"error": "busy"} with a 200
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.listing(COMMIT)
    assert caught.value.code == "E_DOWNLOAD" and "no file listing" in caught.value.what
    assert endpoint in caught.value.what and "proxy" in caught.value.what
    assert not os.path.exists(str(tmp_path / "state" / ("listing-%s.json" % COMMIT)))


def test_the_hubs_own_answer_from_another_host_is_still_the_hubs(make, origin, pauses):
    """A mirror (HF_ENDPOINT) may redirect to huggingface.co itself: an answer with the Hub's
    X-Error-* headers is the Hub's wherever it comes from, never a CDN's refusal."""
    origin.cdn = True
    origin.always = (403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model X is restricted."})
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        make({"model.safetensors": payload(50)}).run()
    assert caught.value.code == "E_HF_TOKEN" and "open its page, accept, retry" in caught.value.what
    assert origin.redirects == 1


def test_a_next_page_link_relative_to_the_page_is_followed(tmp_path, hub_api, pauses):
    # RFC 8288: a Link's target may be a relative reference, resolved against the page's URL.
    handler, endpoint = hub_api
    handler.link = "relative"
    assert [e["path"] for e in hub_snapshot(tmp_path, endpoint).listing(COMMIT)] == [
        "config.json", "sub/model.safetensors"]


def test_a_next_page_on_another_origin_gets_no_token(tmp_path, hub_api, pauses):
    # As a redirect to another origin drops the Authorization header (httpx, requests), so does a Link.
    handler, endpoint = hub_api
    handler.link = "elsewhere"
    assert len(hub_snapshot(tmp_path, endpoint).listing(COMMIT)) == 2
    assert [auth for path, auth in handler.seen] == ["Bearer " + TOKEN, None]
