# -*- coding: utf-8 -*-
"""The transfer's hashing: the checksum is computed while the bytes arrive, a resume hashes the
bytes already on disk once, and a wrong byte anywhere fails with E_DOWNLOAD. The Hub's side is a
small in-memory server speaking what huggingface_hub's session gives the transfer (status,
headers, a raw byte iterator, Range)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import random

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_transfer

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
                                endpoint="http://hub.invalid", chunk_size=chunk)
    snap._hub = (hub, hub, None)
    os.makedirs(snap.partial_dir)
    os.makedirs(snap.local_dir)
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


def test_writer_hashes_every_byte_it_writes_and_commits_at_chunk_boundaries(tmp_path):
    data = payload(3 * MIB + 12345)
    commits = []
    fd = os.open(str(tmp_path / "f"), os.O_WRONLY | os.O_CREAT)
    writer = hf_transfer.HashingWriter(fd, hashlib.sha256(), 0, commits.append)
    next_commit = MIB
    for start in range(0, len(data), 70000):
        writer.write(data[start:start + 70000])
        if writer.position >= next_commit:
            writer.commit()
            next_commit += MIB
    digest = writer.close().hexdigest()
    os.close(fd)
    assert digest == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "f").read_bytes() == data
    assert commits == [70000 * 15, 70000 * 30, 70000 * 45]


def test_writer_reports_a_failure_of_its_hashing_thread(tmp_path):
    class Broken:
        def update(self, block):
            raise ValueError("hasher broke")

    fd = os.open(str(tmp_path / "f"), os.O_WRONLY | os.O_CREAT)
    writer = hf_transfer.HashingWriter(fd, Broken(), 0, lambda position: None)
    for dummy in range(40):  # more batches than the queue holds: the writer must not block
        writer.write(b"x" * hf_transfer.READ_BLOCK)
    with pytest.raises(ValueError, match="hasher broke"):
        writer.close()
    os.close(fd)


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


def test_a_file_that_ends_short_asks_for_a_rerun(tmp_path):
    data = payload(MIB)
    spec = spec_for("model.safetensors", data)
    snap = snapshot(tmp_path, FakeHub({"model.safetensors": data[:-10]}))
    with pytest.raises(hf_transfer.SnapshotError) as caught:
        snap._fetch(COMMIT, spec, hf_transfer.Progress(None, len(data)))
    assert caught.value.code == "E_DOWNLOAD"
    assert "rerun to resume" in caught.value.what


def test_new_hasher_matches_the_kinds_the_plan_gives():
    assert hf_plan.new_hasher({"kind": "lfs", "size": 3}).name == "sha256"
