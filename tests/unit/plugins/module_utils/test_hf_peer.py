# -*- coding: utf-8 -*-
"""The seed's peer server: only the run's secret gets a byte, only verified files are served, and
it stops on its stop file, when idle, or at its lifetime."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import http.client
import json
import os
import socket
import threading
import time

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer, hf_plan

REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold-Ablit"
COMMIT = "57edefd2f5d9b371c8345883304d5af68b52fa24"
SECRET = "s3cretForThisRunOnly0123456789"
SHARD = b"gated shard bytes " * 4096


def _git_oid(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_repo(tmp_path, verify=True):
    """A verified snapshot the way hf_snapshot leaves it: files, listing and verification records."""
    local, state = tmp_path / "model-ablit", tmp_path / "state"
    local.mkdir()
    state.mkdir()
    files = {"config.json": b'{"model": "glm"}', "model-00001-of-00001.safetensors": SHARD}
    entries = []
    for path, data in files.items():
        (local / path).write_bytes(data)
        entry = {"type": "file", "path": path, "size": len(data), "oid": _git_oid(data)}
        if path.endswith(".safetensors"):
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        entries.append(entry)
    (state / ("listing-%s.json" % COMMIT)).write_text(json.dumps({"repo_id": REPO, "commit": COMMIT,
                                                                  "entries": entries}))
    records = {}
    if verify:
        for spec in hf_plan.plan_files(entries):
            st = os.stat(str(local / spec["path"]))
            records[hf_plan.verify_key(COMMIT, spec, st.st_size, st.st_mtime_ns)] = spec["digest"]
    (state / "verified.json").write_text(json.dumps(records))
    return {"repo_id": REPO, "revision": COMMIT, "local_dir": str(local), "state_dir": str(state), "gated": True}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(name="server")
def server_fixture(tmp_path):
    repo = make_repo(tmp_path)
    port = free_port()
    stop = tmp_path / "stop"
    ready = threading.Event()
    outcome = {}

    def run():
        outcome.update(hf_peer.serve([repo], "127.0.0.1", port, str(stop), 60, SECRET, idle_timeout=30, ready=ready))

    thread = threading.Thread(target=run)
    thread.start()
    ready.wait(10)
    yield port, outcome
    stop.write_text("")
    thread.join(10)


def get(port, path, secret=None, scheme="Bearer", extra=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = dict(extra or {})
    if secret is not None:
        headers["Authorization"] = "%s %s" % (scheme, secret)
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


SHARD_PATH = "/%s/resolve/%s/model-00001-of-00001.safetensors" % (REPO, COMMIT)
TREE_PATH = "/api/models/%s/tree/%s" % (REPO, COMMIT)


@pytest.mark.parametrize("secret,scheme", [(None, "Bearer"), ("wrong-secret-0123456789", "Bearer"),
                                           (SECRET + "x", "Bearer"), (SECRET, "Basic"), ("", "Bearer")])
def test_without_the_runs_secret_nobody_gets_a_byte(server, secret, scheme):
    port, dummy = server
    for path in (SHARD_PATH, TREE_PATH, "/api/models/%s/revision/%s" % (REPO, COMMIT)):
        status, headers, body = get(port, path, secret, scheme)
        assert status == 401
        assert SHARD[:32] not in body and b"safetensors" not in body
        assert headers.get("WWW-Authenticate") == "Bearer"


def test_with_the_secret_a_peer_gets_the_listing_and_the_gated_files(server):
    port, dummy = server
    status, dummy, body = get(port, TREE_PATH, SECRET)
    assert status == 200 and {e["path"] for e in json.loads(body)} == {"config.json", "model-00001-of-00001.safetensors"}
    status, headers, body = get(port, SHARD_PATH, SECRET)
    assert status == 200 and body == SHARD and headers["X-Repo-Commit"] == COMMIT


def test_a_range_resumes_and_past_the_end_is_416(server):
    port, dummy = server
    status, headers, body = get(port, SHARD_PATH, SECRET, extra={"Range": "bytes=100-"})
    assert status == 206 and body == SHARD[100:]
    assert headers["Content-Range"] == "bytes 100-%d/%d" % (len(SHARD) - 1, len(SHARD))
    status, headers, dummy = get(port, SHARD_PATH, SECRET, extra={"Range": "bytes=%d-" % len(SHARD)})
    assert status == 416 and headers["Content-Range"] == "bytes */%d" % len(SHARD)


def test_unknown_repository_revision_or_file_is_404_with_the_hubs_codes(server):
    port, dummy = server
    assert get(port, "/other/repo/resolve/%s/config.json" % COMMIT, SECRET)[1]["X-Error-Code"] == "RepoNotFound"
    assert get(port, "/%s/resolve/%s/config.json" % (REPO, "0" * 40), SECRET)[1]["X-Error-Code"] == "RevisionNotFound"
    assert get(port, "/%s/resolve/%s/nope.json" % (REPO, COMMIT), SECRET)[1]["X-Error-Code"] == "EntryNotFound"


def test_the_counters_count_refusals_and_bytes(server):
    port, outcome = server
    get(port, SHARD_PATH)
    get(port, SHARD_PATH, SECRET)
    assert hf_peer.PeerHandler.stats["refused"] == 1 and hf_peer.PeerHandler.stats["bytes"] == len(SHARD)


def test_an_unverified_file_is_never_served(tmp_path):
    repo = make_repo(tmp_path, verify=False)
    with pytest.raises(ValueError, match="is not verified"):
        hf_peer.load_verified_repo(repo)


def test_the_server_stops_when_idle(tmp_path):
    repo = make_repo(tmp_path)
    began = time.time()
    outcome = hf_peer.serve([repo], "127.0.0.1", free_port(), str(tmp_path / "stop"), 60, SECRET, idle_timeout=1)
    assert outcome["stopped"] == "idle" and time.time() - began < 5


def test_the_server_never_serves_without_a_secret(tmp_path):
    with pytest.raises(ValueError, match="no secret"):
        hf_peer.serve([make_repo(tmp_path)], "127.0.0.1", free_port(), str(tmp_path / "stop"), 60, "")


def test_should_stop_names_why():
    assert hf_peer.should_stop(100, 0, 90, 1000, 30, False) is None
    assert hf_peer.should_stop(100, 0, 90, 1000, 30, True) == "stop file"
    assert hf_peer.should_stop(100, 0, 60, 1000, 30, False) == "idle"
    assert hf_peer.should_stop(100, 0, 99, 50, 30, False) == "lifetime"
    assert hf_peer.should_stop(10 ** 6, 0, 0, 0, 0, False) is None  # both off


def test_authorized_compares_the_bearer_secret():
    assert hf_peer.authorized("Bearer " + SECRET, SECRET)
    assert hf_peer.authorized("bearer  " + SECRET + " ", SECRET)
    assert not hf_peer.authorized("Bearer " + SECRET, "")
    assert not hf_peer.authorized(None, SECRET)
    assert not hf_peer.authorized(SECRET, SECRET)


def test_the_secret_file_must_be_owner_only(tmp_path):
    path = tmp_path / "peer.secret"
    path.write_text(SECRET + "\n")
    os.chmod(str(path), 0o644)
    with pytest.raises(ValueError, match="owner only"):
        hf_peer.read_secret(str(path))
    os.chmod(str(path), 0o600)
    assert hf_peer.read_secret(str(path)) == SECRET
    path.write_text("short\n")
    with pytest.raises(ValueError, match="shorter"):
        hf_peer.read_secret(str(path))
