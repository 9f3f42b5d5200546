# -*- coding: utf-8 -*-
"""hf_snapshot's transfer engine with the real huggingface_hub client against the Hub emulator
(tests/standins/hub) on loopback: faults the module must survive or report with its codes."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_transfer  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "standins", "hub"))
from emulator_process import running_hub  # noqa: E402  pylint: disable=wrong-import-position

REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold"
ABLIT = REPO + "-Ablit"
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
ABLIT_COMMIT = "57edefd2f5d9b371c8345883304d5af68b52fa24"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with running_hub(tmp_path_factory.mktemp("repos"), tokens="accepted:hf_ok,denied:hf_denied") as url:
        yield url


def control(hub, path, data=None):
    body = json.dumps(data).encode() if data is not None else b""
    with urllib.request.urlopen(urllib.request.Request(hub + path, data=body, method="POST" if data is not None
                                                       or path.endswith("reset") else "GET")) as resp:
        text = resp.read()
    return json.loads(text) if text else None


@pytest.fixture()
def fresh(hub):
    control(hub, "/_emulator/reset")
    return hub


def snapshot(hub, tmp_path, **kwargs):
    kwargs.setdefault("repo_id", REPO)
    kwargs.setdefault("revision", COMMIT)
    return hf_transfer.Snapshot(kwargs.pop("repo_id"), kwargs.pop("revision"), str(tmp_path / "model"),
                                str(tmp_path / "state"), endpoint=hub, **kwargs)


def test_a_cut_connection_is_resumed_with_a_range_in_the_same_run(fresh, tmp_path):
    control(fresh, "/_emulator/faults", {"cut": {"model-00002-of-00002.safetensors": 1536 * 1024}})
    result = snapshot(fresh, tmp_path, chunk_size=MIB).run()
    assert result["verified"]
    ranges = [e["range"] for e in control(fresh, "/_emulator/log") if e["status"] == 206]
    # It resumes from what reached the disk before the cut (the client reads 1 MiB blocks).
    assert len(ranges) == 1
    start = int(ranges[0][6:-1])
    assert 1536 * 1024 - hf_transfer.READ_BLOCK <= start <= 1536 * 1024


def test_a_corrupt_download_is_refused_and_never_lands(fresh, tmp_path):
    control(fresh, "/_emulator/faults", {"corrupt": ["model-00001-of-00002.safetensors"]})
    with pytest.raises(hf_transfer.SnapshotError) as err:
        snapshot(fresh, tmp_path).run()
    assert err.value.code == "E_DOWNLOAD" and "wrong checksum" in err.value.what
    assert not os.path.exists(tmp_path / "model" / "model-00001-of-00002.safetensors")


def test_a_server_error_is_a_download_error_to_rerun(fresh, tmp_path, monkeypatch):
    pauses = []
    monkeypatch.setattr(hf_transfer, "busy_sleep", pauses.append)
    control(fresh, "/_emulator/faults", {"status": {"config.json": 500}})
    with pytest.raises(hf_transfer.SnapshotError) as err:
        snapshot(fresh, tmp_path).run()
    assert err.value.code == "E_DOWNLOAD" and "rerun to resume" in err.value.what and "4 attempts" in err.value.what
    assert pauses == [2.0, 4.0, 8.0]  # asked again after a pause, a bounded number of times
    assert len([e for e in control(fresh, "/_emulator/log") if e["path"].endswith("/config.json")]) == 4


@pytest.mark.parametrize("status,retry_after,pause", [(429, "3", 3.0), (503, None, 2.0), (502, "0", 0.0)])
def test_a_busy_hub_is_asked_again_after_the_pause_it_asks_for(fresh, tmp_path, monkeypatch, status, retry_after,
                                                               pause):
    pauses = []
    monkeypatch.setattr(hf_transfer, "busy_sleep", pauses.append)
    faults = {"status": {"model-00001-of-00002.safetensors": status}, "status_times": 2}
    if retry_after is not None:
        faults["retry_after"] = retry_after
    control(fresh, "/_emulator/faults", faults)
    assert snapshot(fresh, tmp_path).run()["verified"]
    assert pauses == [pause, pause * 2 if retry_after is None else pause]
    answers = [e["status"] for e in control(fresh, "/_emulator/log")
               if e["path"].endswith("/model-00001-of-00002.safetensors")]
    assert answers == [status, status, 302]


def test_gated_repository_without_token_with_bad_token_and_without_terms(fresh, tmp_path):
    cases = [(None, "needs a token for this gated repository"), ("hf_bad", "does not accept this token"),
             ("hf_denied", "has not agreed to the repository's terms")]
    for token, text in cases:
        with pytest.raises(hf_transfer.SnapshotError) as err:
            snapshot(fresh, tmp_path, repo_id=ABLIT, revision=ABLIT_COMMIT, token=token).run()
        assert err.value.code == "E_HF_TOKEN" and text in err.value.what
    assert snapshot(fresh, tmp_path, repo_id=ABLIT, revision=ABLIT_COMMIT, token="hf_ok").run()["verified"]


def test_unknown_repository_and_revision_are_settings_errors(fresh, tmp_path):
    with pytest.raises(hf_transfer.SnapshotError) as err:
        snapshot(fresh, tmp_path, repo_id="nobody/nothing").run()
    assert err.value.code == "E_SETTINGS" and "no repository nobody/nothing" in err.value.what
    with pytest.raises(hf_transfer.SnapshotError) as err:
        snapshot(fresh, tmp_path, revision="f" * 40).run()
    assert err.value.code == "E_SETTINGS" and "no revision" in err.value.what


def test_a_branch_is_refused_unless_allowed(fresh, tmp_path):
    with pytest.raises(hf_transfer.SnapshotError):
        snapshot(fresh, tmp_path, revision="main").run()
    assert snapshot(fresh, tmp_path, revision="main", allow_unpinned=True).run()["revision"] == COMMIT


def test_no_space_is_reported_before_the_first_byte(fresh, tmp_path, monkeypatch):
    monkeypatch.setattr(hf_transfer, "free_bytes", lambda path: MIB)
    with pytest.raises(hf_transfer.SnapshotError) as err:
        snapshot(fresh, tmp_path).run()
    assert err.value.code == "E_DISK"
    assert not [e for e in control(fresh, "/_emulator/log") if "/resolve/" in e["path"] or "cdn-lfs" in e["path"]]


def test_a_complete_snapshot_needs_no_request_and_reads_no_bytes(fresh, tmp_path):
    assert snapshot(fresh, tmp_path).run()["downloaded_bytes"] > 4 * MIB
    control(fresh, "/_emulator/reset")
    again = snapshot(fresh, tmp_path).run()
    assert (again["changed"], again["hub_requests"], again["local_bytes_hashed"]) == (False, 0, 0)
    assert control(fresh, "/_emulator/log") == []


def test_sigkill_mid_file_resumes_from_the_last_chunk(fresh, tmp_path):
    control(fresh, "/_emulator/faults", {"throttle_bps": 400000})
    code = ("import sys; sys.path.insert(0, %r); from ansible_collections.glm53.tensorfold.plugins.module_utils "
            "import hf_transfer as t; t.Snapshot(%r, %r, %r, %r, endpoint=%r, chunk_size=%d, progress_file=%r).run()"
            % (os.path.join(ROOT, ".cache", "collections"), REPO, COMMIT, str(tmp_path / "model"),
               str(tmp_path / "state"), fresh, MIB, str(tmp_path / "progress.json")))
    child = subprocess.Popen([sys.executable, "-c", code])
    # Kill once a file in flight has a committed chunk (its record says so), whatever the load.
    deadline = time.time() + 60
    partial_dir = tmp_path / "state" / "partial"
    while time.time() < deadline:
        try:
            records = [n for n in os.listdir(partial_dir) if n.endswith(".json")]
            in_flight = []
            for name in records:
                with open(partial_dir / name) as handle:
                    record = json.load(handle)
                in_flight.append(0 < record.get("committed", 0) < record.get("size", 0))
            if any(in_flight):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    # Two files are fetched at once: each one in flight left a partial file and its record.
    on_disk = {}
    for name in os.listdir(partial_dir):
        if name.endswith(".json"):
            with open(partial_dir / name) as handle:
                record = json.load(handle)
            part = partial_dir / (name[:-len(".json")] + ".incomplete")
            if record["committed"] > 0 and part.exists():
                on_disk[record["path"]] = os.path.getsize(part)
    control(fresh, "/_emulator/reset")
    result = snapshot(fresh, tmp_path, chunk_size=MIB).run()
    ranged = [e for e in control(fresh, "/_emulator/log") if e["status"] == 206]
    assert ranged and len(ranged) == len(on_disk)
    resumed = dict((r["path"], r["from"]) for r in result["resumed"])
    assert sorted(int(e["range"][6:-1]) for e in ranged) == sorted(resumed.values())
    for path, start in resumed.items():
        assert 0 < start <= on_disk[path] and on_disk[path] - start <= MIB  # at most one chunk again
    assert all(e["bytes"] == 2 * MIB - int(e["range"][6:-1]) for e in ranged)
    assert result["verified"]
    assert not os.path.exists(tmp_path / "state" / "partial")


@pytest.mark.parametrize("status", [403, 404])
def test_a_cdn_refusal_of_a_signed_link_asks_the_hub_for_a_fresh_one(fresh, tmp_path, status):
    # The Hub's 302 goes to its CDN; an expired signed link is refused there with an XML body.
    shard = "model-00001-of-00002.safetensors"
    control(fresh, "/_emulator/faults", {"cdn_status": {shard: status}, "cdn_status_times": 1})
    assert snapshot(fresh, tmp_path, token="hf_ok").run()["verified"]
    with open(str(tmp_path / "state" / ("listing-%s.json" % COMMIT))) as handle:
        sha = [e["lfs"]["oid"] for e in json.load(handle)["entries"] if e["path"] == shard][0]
    log = [e for e in control(fresh, "/_emulator/log") if e["path"].endswith((shard, sha))]
    assert [(e["status"], e["path"].startswith("/cdn-lfs/")) for e in log] == [
        (302, False), (status, True), (302, False), (200, True)]
    assert [e["auth"] for e in log] == [True, False, True, False]  # the token never reaches the CDN


def test_a_cdn_that_keeps_refusing_is_no_token_error(fresh, tmp_path):
    control(fresh, "/_emulator/faults", {"cdn_status": {"model-00001-of-00002.safetensors": 403}})
    with pytest.raises(hf_transfer.SnapshotError) as err:
        snapshot(fresh, tmp_path, token="hf_ok").run()
    assert err.value.code == "E_DOWNLOAD" and "answered HTTP 403" in err.value.what and "token" not in err.value.what
