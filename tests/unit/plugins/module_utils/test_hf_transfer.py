# -*- coding: utf-8 -*-
"""The transfer's hashing: the checksum is computed while the bytes arrive, a resume hashes the
bytes already on disk once, and a wrong byte anywhere fails with E_DOWNLOAD. The Hub's side is a
small in-memory server speaking what huggingface_hub's session gives the transfer (status,
headers, a raw byte iterator, Range) for an HTTPS endpoint, and a real HTTP server on loopback
for a plain-HTTP one (read with http.client). Verifications made in this boot count in this
boot only until their files are synced."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import random
import sys
import threading

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_records, hf_transfer

COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
REPO = "owner/model"
MIB = 1024 * 1024


class FakeResponse:
    def __init__(self, status, body, piece):
        self.status_code = status
        self.headers = {}
        self._body = body
        self._piece = piece

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def iter_raw(self):
        for start in range(0, len(self._body), self._piece):
            yield self._body[start:start + self._piece]

    iter_bytes = iter_raw


class FakeHub:
    """Serves ``files`` (path -> bytes) like the Hub's resolve endpoint, honouring Range."""

    def __init__(self, files, piece=65536, ignore_range=False):
        self.files = files
        self.piece = piece
        self.ignore_range = ignore_range
        self.requests = []

    # huggingface_hub's module, its utils and the session, all in one object
    def hf_hub_url(self, repo_id, path, revision, endpoint):
        return "%s/%s/resolve/%s/%s" % (endpoint, repo_id, revision, path)

    def build_hf_headers(self, token):
        return {}

    def get_session(self):
        return self

    def stream(self, method, url, headers, timeout):
        path = url.split("/resolve/%s/" % COMMIT, 1)[1]
        body = self.files[path]
        self.requests.append({"path": path, "range": headers.get("Range")})
        if headers.get("Range") and not self.ignore_range:
            start = int(headers["Range"][len("bytes="):-1])
            if start >= len(body):
                return FakeResponse(416, b"", self.piece)
            return FakeResponse(206, body[start:], self.piece)
        return FakeResponse(200, body, self.piece)


def spec_for(path, data, kind="lfs"):
    if kind == "lfs":
        digest = hashlib.sha256(data).hexdigest()
    else:
        digest = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return {"path": path, "size": len(data), "kind": kind, "digest": digest}


def snapshot(tmp_path, hub, chunk=MIB):
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                                endpoint="https://hub.invalid", chunk_size=chunk)
    snap._hub = (hub, hub, None)
    for path in (snap.partial_dir, snap.local_dir):
        if not os.path.isdir(path):
            os.makedirs(path)
    return snap


def leave_partial(snap, spec, data, committed, torn=0):
    """What a killed download leaves: the bytes up to ``committed`` fsynced and recorded, maybe
    ``torn`` more bytes after them that were never committed."""
    part, rec = snap._partial_paths(COMMIT, spec)
    with open(part, "wb") as handle:
        handle.write(data[:committed + torn])
    with open(rec, "w") as handle:
        json.dump({"path": spec["path"], "digest": spec["digest"], "size": spec["size"], "committed": committed},
                  handle)


def payload(size, seed=5):
    return random.Random(seed).getrandbits(8 * size).to_bytes(size, "little") if size else b""


def test_the_hasher_hashes_every_piece_in_order_and_hands_each_buffer_back(tmp_path):
    data = payload(3 * MIB + 12345)
    released = []
    hasher = hf_transfer.PieceHasher(hashlib.sha256())
    for start in range(0, len(data), 70000):
        piece = data[start:start + 70000]
        if start % 140000:
            hasher.update([piece[:1000], piece[1000:]])  # a list of blocks, as the session gives
        else:
            hasher.update(memoryview(piece), release=lambda start=start: released.append(start))
    assert hasher.close().hexdigest() == hashlib.sha256(data).hexdigest()
    assert released == list(range(0, len(data), 140000))


def test_a_piece_reaches_the_file_whole_in_writes_of_a_slice_at_most(tmp_path, monkeypatch):
    calls = []

    class Os:  # the module's os, its write() recorded and now and then short
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def write(fd, data):
            calls.append(len(data))
            return os.write(fd, bytes(data)[:len(data) - 7 if len(calls) % 3 == 0 else len(data)])

    monkeypatch.setattr(hf_transfer, "os", Os())
    data = payload(hf_transfer.PIECE + 12345)
    path = tmp_path / "file"
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT)
    try:
        assert hf_transfer.write_all(fd, [memoryview(data)[:5000], bytearray(data[5000:])]) == len(data)
    finally:
        os.close(fd)
    assert path.read_bytes() == data
    assert max(calls) == hf_transfer.WRITE_SLICE < hf_transfer.PIECE
    assert len(calls) >= len(data) // hf_transfer.WRITE_SLICE


def test_the_hasher_reports_a_failure_of_its_thread_and_still_hands_buffers_back():
    class Broken:
        def update(self, block):
            raise ValueError("hasher broke")

    released = []
    hasher = hf_transfer.PieceHasher(Broken())
    for dummy in range(40):  # more pieces than the queue holds: the receiving side must not block
        hasher.update(b"x" * hf_transfer.READ_BLOCK, release=lambda: released.append(1))
    with pytest.raises(ValueError, match="hasher broke"):
        hasher.close()
    assert len(released) == 40


@pytest.mark.parametrize("size", [0, 1, 5000])
def test_small_files_are_checked_by_their_git_oid(tmp_path, size):
    data = payload(size)
    spec = spec_for("config.json", data, kind="git")
    snap = snapshot(tmp_path, FakeHub({"config.json": data}))
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data
    assert snap.local_bytes_hashed == 0  # hashed on arrival, never read back


@pytest.mark.parametrize("committed,torn", [(1, 0), (MIB - 1, 0), (MIB, 0), (MIB, 4096), (2 * MIB + 7, 300000),
                                            (3 * MIB, 0)])
def test_a_resume_hashes_only_the_bytes_before_it_and_ends_with_the_right_digest(tmp_path, committed, torn):
    data = payload(3 * MIB + 321)
    spec = spec_for("model.safetensors", data)
    hub = FakeHub({"model.safetensors": data})
    snap = snapshot(tmp_path, hub)
    leave_partial(snap, spec, data, committed, torn)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data
    assert snap.local_bytes_hashed == committed  # the resume prefix, once
    assert hub.requests == [{"path": "model.safetensors", "range": "bytes=%d-" % committed}]
    assert snap.resumed == [{"path": "model.safetensors", "from": committed, "discarded": torn}]
    assert not os.path.exists(snap._partial_paths(COMMIT, spec)[0])


def test_a_resume_from_a_server_that_ignores_range_starts_the_file_over(tmp_path):
    data = payload(2 * MIB)
    spec = spec_for("model.safetensors", data)
    snap = snapshot(tmp_path, FakeHub({"model.safetensors": data}, ignore_range=True))
    leave_partial(snap, spec, data, MIB)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data


def test_a_corrupted_byte_on_the_wire_fails_with_e_download(tmp_path):
    data = payload(2 * MIB)
    spec = spec_for("model.safetensors", data)
    bad = bytearray(data)
    bad[1234567] ^= 0x01
    snap = snapshot(tmp_path, FakeHub({"model.safetensors": bytes(bad)}))
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert caught.value.code == "E_DOWNLOAD"
    assert "wrong checksum" in caught.value.what
    assert not os.path.exists(os.path.join(snap.local_dir, "model.safetensors"))
    assert not os.path.exists(snap._partial_paths(COMMIT, spec)[0])  # the bad bytes do not stay


@pytest.mark.parametrize("where", [0, MIB // 2, MIB - 1])
def test_a_corrupted_byte_already_on_disk_before_the_resume_point_is_caught(tmp_path, where):
    data = payload(2 * MIB)
    spec = spec_for("model.safetensors", data)
    hub = FakeHub({"model.safetensors": data})
    snap = snapshot(tmp_path, hub)
    bad = bytearray(data)
    bad[where] ^= 0x80
    leave_partial(snap, spec, bytes(bad), MIB)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    # The resumed file's digest was wrong: it was dropped and fetched whole, and now is right.
    assert open(final, "rb").read() == data
    assert snap.corrupted == [{"path": "model.safetensors", "where": "download"}]
    assert [r["range"] for r in hub.requests] == ["bytes=%d-" % MIB, None]


def test_a_file_that_ends_short_every_time_is_a_download_failure_naming_where(tmp_path):
    # The body that ends early is resumed at once; the server then refuses a range at its end.
    data = payload(MIB)
    spec = spec_for("model.safetensors", data)
    snap = snapshot(tmp_path, FakeHub({"model.safetensors": data[:-10]}))
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert caught.value.code == "E_DOWNLOAD"
    assert "refuses a resume at byte %d of model.safetensors" % (MIB - 10) in caught.value.what


def test_new_hasher_matches_the_kinds_the_plan_gives():
    assert hf_plan.new_hasher({"kind": "lfs", "size": 3}).name == "sha256"


class PlainHub(BaseHTTPRequestHandler):
    """A real HTTP server on loopback: ``/resolve/`` answers 302 to ``/cdn/`` on the same server
    under another name (another origin), which serves the bytes with Range, may cut the body
    once at ``cut`` bytes, and records whether the token came along."""

    protocol_version = "HTTP/1.1"
    files = {}
    seen = []
    cut = [None]

    def log_message(self, *args):
        return

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Authorization"), self.headers.get("Range")))
        if "/resolve/" in self.path:
            path = self.path.split("/resolve/%s/" % COMMIT, 1)[1]
            self.send_response(302)
            self.send_header("Location", "http://localhost:%d/cdn/%s" % (self.server.server_port, path))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.files[self.path[len("/cdn/"):]]
        start = int(self.headers["Range"][len("bytes="):-1]) if self.headers.get("Range") else 0
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut, self.cut[0] = self.cut[0], None
        if cut is not None:
            self.wfile.write(body[start:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body[start:])


@pytest.fixture
def plain_hub():
    PlainHub.seen, PlainHub.cut = [], [None]
    server = ThreadingHTTPServer(("127.0.0.1", 0), PlainHub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class HubUtils:
    """huggingface_hub's URL and header helpers, for a request that a redirect hands to the session."""

    @staticmethod
    def hf_hub_url(repo_id, path, revision, endpoint):
        return "%s/%s/resolve/%s/%s" % (endpoint, repo_id, revision, path)

    @staticmethod
    def build_hf_headers(token):
        return {"Authorization": "Bearer %s" % token} if token else {}


def no_hub():
    raise AssertionError("huggingface_hub was asked for on a plain-HTTP endpoint")


def plain_snapshot(tmp_path, server, chunk=MIB):
    """A snapshot from a plain-HTTP server; it has no huggingface_hub unless the test gives one."""
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                                endpoint="http://127.0.0.1:%d" % server.server_port, chunk_size=chunk,
                                token="secret-token")
    snap.hub = no_hub
    os.makedirs(snap.partial_dir)
    os.makedirs(snap.local_dir)
    return snap


def test_a_plain_http_endpoint_is_read_with_http_client_and_the_token_stays_with_its_origin(tmp_path, plain_hub,
                                                                                            monkeypatch):
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    data = payload(2 * hf_transfer.PIECE + 4321)  # more than one buffer, the last one partly filled
    PlainHub.files = {"model.safetensors": data}
    spec = spec_for("model.safetensors", data)
    snap = plain_snapshot(tmp_path, plain_hub)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data
    assert snap.local_bytes_hashed == 0
    assert [(path.split("/")[2] if path.startswith("/cdn/") else "resolve", auth) for path, auth, dummy in PlainHub.seen] \
        == [("resolve", "Bearer secret-token"), ("model.safetensors", None)]


def test_a_cut_plain_http_body_is_resumed_in_the_same_run_from_the_bytes_written(tmp_path, plain_hub, monkeypatch):
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    data = payload(3 * MIB + 99)
    PlainHub.files = {"model.safetensors": data}
    PlainHub.cut = [2 * MIB + 5]
    spec = spec_for("model.safetensors", data)
    snap = plain_snapshot(tmp_path, plain_hub)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data
    ranges = [rng for path, dummy, rng in PlainHub.seen if path.startswith("/cdn/")]
    assert ranges == [None, "bytes=%d-" % (2 * MIB + 5)]  # every byte written before the cut was kept
    assert snap.resumed == [{"path": "model.safetensors", "from": 2 * MIB + 5, "discarded": 0}]


def test_a_redirect_to_https_hands_the_request_to_the_session(tmp_path, plain_hub, monkeypatch):
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    data = payload(MIB + 5)
    spec = spec_for("model.safetensors", data)
    snap = plain_snapshot(tmp_path, plain_hub)
    hub = FakeHub({"model.safetensors": data})
    monkeypatch.setattr(PlainHub, "do_GET", lambda self: (self.send_response(302), self.send_header(
        "Location", "https://cdn.invalid/x"), self.send_header("Content-Length", "0"), self.end_headers()))
    del snap.hub  # the session is the library's: the redirected request may ask for it
    snap._hub = (HubUtils, type("Utils", (HubUtils,), {"get_session": staticmethod(lambda: hub)}), None)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data
    assert [r["path"] for r in hub.requests] == ["model.safetensors"]


@pytest.mark.parametrize("path", ["model-00001-of-00002.safetensors", "sub dir/a+b #1.json", "ünï/cödé%.bin"])
def test_a_plain_http_request_is_the_one_huggingface_hub_would_make(path, monkeypatch):
    """A plain-HTTP endpoint's URL and token header are made without the library: they must be the
    ones its own helpers make for the same file (the real huggingface_hub, in requirements.txt)."""
    import huggingface_hub
    from huggingface_hub import utils as hf_utils
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    endpoint = "http://peer.internal:8765"
    for token in ("run-secret", None):
        snap = hf_transfer.Snapshot(REPO, COMMIT, "/nonexistent/model", "/nonexistent/state", endpoint=endpoint,
                                    token=token)
        snap.hub = no_hub
        url, headers = snap.file_request(COMMIT, {"path": path})
        assert url == huggingface_hub.hf_hub_url(REPO, path, revision=COMMIT, endpoint=endpoint)
        wanted = hf_utils.build_hf_headers(token=token or False)
        assert headers.get("Authorization") == wanted.get("authorization", wanted.get("Authorization"))


def test_a_peer_copy_with_the_listing_given_never_imports_huggingface_hub(tmp_path, plain_hub, monkeypatch):
    """A whole run from a plain-HTTP peer, its listing handed over as weights_fetch hands the seed's."""
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    PlainHub.files = {"a.safetensors": payload(MIB + 3), "b.json": payload(5000, seed=7)}
    entries = [{"type": "file", "path": path, "size": len(data), "oid": "0" * 40,
                "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}}
               for path, data in PlainHub.files.items()]
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                                endpoint="http://127.0.0.1:%d" % plain_hub.server_port, token="secret-token",
                                listing={"repo_id": REPO, "commit": COMMIT, "entries": entries})
    snap.hub = no_hub
    result = snap.run()
    assert sorted(result["verified_files"]) == sorted(PlainHub.files)
    assert snap.hub_requests == 2  # the two files' GETs, nothing asked of an API


def test_a_client_that_cannot_be_imported_is_a_coded_failure(tmp_path, monkeypatch):
    """The module finds huggingface_hub without importing it; a copy that then cannot import it
    (a dependency of it missing) fails with E_DEPENDENCY, not a traceback."""
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # what a failed import leaves
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                                endpoint="https://hub.invalid")
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap.hub()
    assert caught.value.code == "E_DEPENDENCY"
    assert "huggingface_hub cannot be imported" in caught.value.what


def test_a_proxy_for_the_host_sends_plain_http_through_the_session(monkeypatch):
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "peer.internal")
    assert not hf_transfer.plain_http("http://hub.internal:8080/x")
    assert hf_transfer.plain_http("http://peer.internal:8080/x")
    assert not hf_transfer.plain_http("https://huggingface.co/x")
    # A peer copy goes straight to the seed's address whatever the environment's proxies say.
    assert hf_transfer.plain_http("http://hub.internal:8080/x", use_proxy=False)
    assert not hf_transfer.plain_http("https://huggingface.co/x", use_proxy=False)


def test_a_direct_copy_with_its_listing_needs_no_huggingface_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # the library cannot be imported
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                                endpoint="http://seed.internal:18470", token="secret", use_proxy=False)
    url, headers = snap.file_request(COMMIT, {"path": "config.json"})
    assert url == "http://seed.internal:18470/%s/resolve/%s/config.json" % (REPO, COMMIT)
    assert headers == {"Authorization": "Bearer secret"}
    with pytest.raises(hf_transfer.SnapshotError) as caught:  # through the proxy it would need the library
        hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                             endpoint="http://seed.internal:18470").file_request(COMMIT, {"path": "config.json"})
    assert caught.value.code == "E_DEPENDENCY"


def test_files_in_place_are_recorded_without_huggingface_hub(tmp_path, monkeypatch):
    """A lending seed's copy after a reboot: its files are hashed again and recorded, nothing is
    fetched, so the run needs no library even with a Hub endpoint (the seed may have none)."""
    data = payload(5000, seed=3)
    entries = [{"type": "file", "path": "a.safetensors", "size": len(data), "oid": "0" * 40,
                "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}}]
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "a.safetensors").write_bytes(data)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"),
                                endpoint="https://hub.invalid", listing={"repo_id": REPO, "commit": COMMIT, "entries": entries})
    result = snap.run()
    assert result["verified_files"] == ["a.safetensors"] and result["downloaded_bytes"] == 0
    assert snap._hub is None


def full_run(tmp_path, files, boot):
    snap = snapshot(tmp_path, FakeHub(files))
    snap.boot = boot
    entries = [{"type": "file", "path": path, "size": len(data), "oid": "0" * 40,
                "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}}
               for path, data in files.items()]
    snap.listing = lambda commit: entries
    return snap, snap.run()


def test_a_verification_counts_without_a_sync_in_its_own_boot_only(tmp_path, monkeypatch):
    files = {"a.safetensors": payload(MIB + 3), "b.safetensors": payload(5000, seed=7)}
    monkeypatch.setattr(hf_records, "boot_id", lambda: "boot-1")
    snap, result = full_run(tmp_path, files, "boot-1")
    assert result["verified"] and sorted(result["verified_files"]) == sorted(files)
    state = str(tmp_path / "state")
    assert not os.path.exists(os.path.join(state, "verified.json"))  # no wait for the disk
    assert len(hf_records.unsynced_records(state)) == 2
    assert len(hf_records.recorded_state(state, COMMIT)[1]) == 2

    # After a reboot (a power cut may have lost bytes the disk had not written) they no longer count.
    monkeypatch.setattr(hf_records, "boot_id", lambda: "boot-2")
    assert hf_records.recorded_state(state, COMMIT)[1] is None
    snap, result = full_run(tmp_path, files, "boot-2")
    assert sorted(result["verified_files"]) == sorted(files)  # hashed again in place
    assert snap.local_bytes_hashed == sum(len(data) for data in files.values())
    assert result["download_files"] == []


def test_a_later_run_in_the_same_boot_syncs_the_files_and_records_them_for_good(tmp_path, monkeypatch):
    files = {"a.safetensors": payload(MIB + 3)}
    monkeypatch.setattr(hf_records, "boot_id", lambda: "boot-1")
    full_run(tmp_path, files, "boot-1")
    snap, result = full_run(tmp_path, files, "boot-1")
    assert result["verified_files"] == [] and snap.local_bytes_hashed == 0 and not result["changed"]
    state = str(tmp_path / "state")
    assert not os.path.exists(os.path.join(state, hf_records.UNSYNCED))
    monkeypatch.setattr(hf_records, "boot_id", lambda: "boot-2")
    assert len(hf_records.recorded_state(state, COMMIT)[1]) == 1  # survives a reboot now


def test_plain_http_resume_points_fall_on_half_chunk_boundaries_however_the_bytes_arrive(
        tmp_path, plain_hub, monkeypatch):
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.setattr(hf_transfer, "PIECE_WAIT", 0)  # every read ends a piece, of whatever size came
    data = payload(3 * MIB + 777)
    PlainHub.files = {"model.safetensors": data}
    spec = spec_for("model.safetensors", data)
    snap = plain_snapshot(tmp_path, plain_hub)
    commits = []
    record = snap._commit_record

    def commit_record(path, spec, position):
        commits.append(position)
        return record(path, spec, position)
    monkeypatch.setattr(snap, "_commit_record", commit_record)
    final = snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert open(final, "rb").read() == data
    assert commits == [0, MIB // 2, MIB, 3 * MIB // 2, 2 * MIB, 5 * MIB // 2, 3 * MIB]


def test_a_fetch_in_a_boot_with_an_id_waits_for_the_disk_nowhere(tmp_path, monkeypatch):
    files = {"a.safetensors": payload(MIB + 3), "b.safetensors": payload(5000, seed=7)}
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink("/proc/self/fd/%d" % fd)) or real_fsync(fd))
    monkeypatch.setattr(hf_records, "boot_id", lambda: "boot-1")
    progress = tmp_path / "progress.json"
    snap = snapshot(tmp_path, FakeHub(files))
    snap.progress_file = str(progress)
    entries = [{"type": "file", "path": path, "size": len(data), "oid": "0" * 40,
                "lfs": {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}}
               for path, data in files.items()]
    snap.listing = lambda commit: entries
    result = snap.run()
    assert result["verified"] and json.load(open(str(progress)))["finished"]
    assert synced == []  # not the shards, the resume records, verified-unsynced.json nor the progress file
    assert len(hf_records.unsynced_records(str(tmp_path / "state"))) == 2

    # Without a boot id every verified file and verified.json are on the disk before they count.
    monkeypatch.setattr(hf_records, "boot_id", lambda: None)
    full_run(tmp_path / "no-boot-id", files, None)
    on_disk = [os.path.basename(path) for path in synced]
    assert sorted(name for name in on_disk if name in files) == sorted(files)
    assert "verified.json.tmp" in on_disk


def test_a_torn_unsynced_record_file_counts_as_no_verification(tmp_path, monkeypatch):
    # What a power cut may leave of verified-unsynced.json, written without an fsync.
    monkeypatch.setattr(hf_records, "boot_id", lambda: "boot-1")
    state = tmp_path / "state"
    state.mkdir()
    (state / hf_records.UNSYNCED).write_text('{"boot_id": "boot-1", "records": {"078455ffe6472f9a52fbc1')
    assert hf_records.unsynced_records(str(state)) == {}
    assert hf_records.load_records(str(state)) is None


class NoHub:
    """A Hub that must not be asked: any use fails the test."""

    def __getattr__(self, name):
        raise AssertionError("the Hub was asked (%s)" % name)


ENTRIES = [{"type": "file", "path": "config.json", "size": 2, "oid": "x"}]


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_given_listing_plans_without_the_hub_and_is_recorded_outside_check_mode(tmp_path, check_mode):
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"), check_mode=check_mode,
                                listing={"repo_id": REPO, "commit": COMMIT, "entries": ENTRIES})
    snap._hub = (NoHub(), NoHub(), NoHub())
    os.makedirs(snap.state_dir)
    assert snap.listing(COMMIT) == ENTRIES and snap.hub_requests == 0
    recorded = tmp_path / "state" / ("listing-%s.json" % COMMIT)
    assert recorded.exists() is not check_mode
    if not check_mode:
        assert json.loads(recorded.read_text()) == {"repo_id": REPO, "commit": COMMIT, "entries": ENTRIES}


@pytest.mark.parametrize("given", [{"repo_id": "owner/other", "commit": COMMIT, "entries": ENTRIES},
                                   {"repo_id": REPO, "commit": "0" * 40, "entries": ENTRIES},
                                   {"repo_id": REPO, "commit": COMMIT}])
def test_a_listing_of_another_repository_or_commit_is_not_taken(tmp_path, given):
    snap = hf_transfer.Snapshot(REPO, COMMIT, str(tmp_path / "model"), str(tmp_path / "state"), listing=given)
    snap._hub = (NoHub(), NoHub(), NoHub())
    with pytest.raises(hf_transfer.SnapshotError):  # it asks the Hub instead (here: one that fails)
        snap.listing(COMMIT)
    assert snap.hub_requests == 1
