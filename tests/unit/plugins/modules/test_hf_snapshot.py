# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""hf_snapshot and the Hub token's file: with forget_token_file the download removes the file as soon
as it has read the token, whether the download then succeeds or fails; a shared file (the peers' run
secret) and check mode leave it alone."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_transfer
from ansible_collections.glm53.tensorfold.plugins.modules import hf_snapshot

TOKEN = "hf_unitForgetCanary4711"
DONE = {"changed": True, "revision": "0" * 40, "files": [], "download_files": [], "downloaded_bytes": 0}


@pytest.fixture(name="transfer")
def transfer_fixture(monkeypatch):
    """A stand-in transfer: records the token it was given and whether the token's file was still
    there when it ran; ``fail`` makes it end with a coded failure."""
    seen = {}

    class Snapshot(object):
        hub_requests, resumed, refetched_bytes = 0, [], 0

        def __init__(self, repo_id, revision, local_dir, state_dir, token=None, **kwargs):
            seen["token"] = token
            seen["check_mode"] = kwargs.get("check_mode")

        def run(self):
            seen["file_during_run"] = seen["path"].exists()
            if seen.get("fail"):
                raise hf_transfer.SnapshotError("E_DOWNLOAD", "the connection was cut")
            return dict(DONE)

    monkeypatch.setattr(hf_snapshot.hf_transfer, "Snapshot", Snapshot)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return seen


def args(tmp_path, token_file, **more):
    base = {"repo_id": "o/ablit", "revision": "5" * 40, "local_dir": str(tmp_path / "model-ablit"),
            "state_dir": str(tmp_path / "state"), "token_file": str(token_file), "gated": True}
    base.update(more)
    return base


def token_file(tmp_path, name="model-ablit.hf-token"):
    path = tmp_path / name
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("fail", [False, True], ids=["done", "failed"])
def test_a_download_told_to_forget_its_token_file_removes_it_once_read(tmp_path, run_module, transfer, fail):
    path = transfer["path"] = token_file(tmp_path)
    transfer["fail"] = fail
    result = run_module(hf_snapshot, **args(tmp_path, path, forget_token_file=True))
    assert transfer["token"] == TOKEN
    assert transfer["file_during_run"] is False, "the token's file was still there while the download ran"
    assert not path.exists()
    assert bool(result.get("failed")) is fail and TOKEN not in str(result)


def test_a_shared_token_file_stays_for_its_other_readers(tmp_path, run_module, transfer):
    path = transfer["path"] = token_file(tmp_path, "peer.secret")
    result = run_module(hf_snapshot, **args(tmp_path, path, gated=False))
    assert transfer["token"] == TOKEN and not result.get("failed")
    assert path.exists()


def test_check_mode_reads_the_token_and_removes_nothing(tmp_path, run_module, transfer):
    path = transfer["path"] = token_file(tmp_path)
    run_module(hf_snapshot, **args(tmp_path, path, forget_token_file=True, _ansible_check_mode=True))
    assert transfer["token"] == TOKEN and transfer["check_mode"] is True
    assert path.exists()


def test_a_missing_token_file_is_no_token_and_no_error(tmp_path, run_module, transfer):
    path = transfer["path"] = tmp_path / "model-ablit.hf-token"
    result = run_module(hf_snapshot, **args(tmp_path, path, forget_token_file=True))
    assert transfer["token"] is None and not result.get("failed")


def test_a_copy_from_an_endpoint_that_never_listens_fails_coded_before_any_request(tmp_path, run_module, transfer,
                                                                                   monkeypatch):
    asked = []
    monkeypatch.setattr(hf_snapshot.net, "wait_for_listener", lambda url, seconds: asked.append((url, seconds)) or False)
    result = run_module(hf_snapshot, repo_id="o/model", revision="5" * 40, local_dir=str(tmp_path / "model"),
                        state_dir=str(tmp_path / "state"), endpoint="http://10.0.0.9:18470", endpoint_wait=60)
    assert result["failed"] and result["code"] == "E_DOWNLOAD"
    assert "http://10.0.0.9:18470 did not accept a connection within 60 s" in result["msg"]
    assert asked == [("http://10.0.0.9:18470", 60)] and "file_during_run" not in transfer


def test_without_endpoint_wait_the_copy_asks_at_once(tmp_path, run_module, transfer, monkeypatch):
    monkeypatch.setattr(hf_snapshot.net, "wait_for_listener", lambda url, seconds: pytest.fail("waited"))
    transfer["path"] = tmp_path / "none"
    result = run_module(hf_snapshot, repo_id="o/model", revision="5" * 40, local_dir=str(tmp_path / "model"),
                        state_dir=str(tmp_path / "state"), endpoint="http://10.0.0.9:18470")
    assert not result.get("failed") and result["changed"]


@pytest.mark.parametrize("where", ["option", "HF_TOKEN"])
def test_a_token_with_surrounding_spaces_or_a_newline_is_taken_as_the_library_takes_it(
        tmp_path, run_module, transfer, monkeypatch, where):
    """huggingface_hub strips a token's surrounding spaces and newlines (HF_TOKEN, its token file): a
    token from a YAML block scalar or ``export HF_TOKEN=...`` with a newline is the same token."""
    path = transfer["path"] = tmp_path / "none.hf-token"
    if where == "HF_TOKEN":
        monkeypatch.setenv("HF_TOKEN", " %s\n" % TOKEN)
        result = run_module(hf_snapshot, **args(tmp_path, path))
    else:
        result = run_module(hf_snapshot, **args(tmp_path, path, token="%s\r\n" % TOKEN))
    assert transfer["token"] == TOKEN and not result.get("failed")
