# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"


def listing():
    # The entries of GET /api/models/{repo}/tree/{rev}?recursive=true (fields as the Hub sends them).
    with open(os.path.join(FIXTURES, "hub_tree_recursive.json")) as handle:
        return json.load(handle)


def test_listing_becomes_files_with_their_checksum_kind():
    files = hf_plan.plan_files(listing())
    by_path = dict((f["path"], f) for f in files)
    assert "vision" not in by_path  # folders are not files
    assert by_path["model-00001-of-00002.safetensors"] == {
        "path": "model-00001-of-00002.safetensors", "size": 4194304, "kind": "lfs",
        "digest": "5a03416c32283454144268694d3046a63130e298b566f8ad6052cd70a6a7d1d1"}
    assert by_path["config.json"]["kind"] == "git"
    assert by_path["config.json"]["digest"] == "21143705374f6be2740fe0eef2ad45d288f2ab74"
    assert [f["path"] for f in files] == sorted(by_path)


def test_allow_patterns_keep_only_matching_paths():
    files = hf_plan.plan_files(listing(), ["*.json"])
    assert [f["path"] for f in files] == ["config.json", "model.safetensors.index.json",
                                          "vision/preprocessor_config.json"]


@pytest.mark.parametrize("path", ["../etc/passwd", "/abs", "a//b", "a/./b", "a/.."])
def test_paths_that_escape_the_folder_are_refused(path):
    with pytest.raises(ValueError):
        hf_plan.safe_relpath(path)


def test_only_full_commits_are_pinned():
    assert hf_plan.is_pinned(COMMIT)
    assert not hf_plan.is_pinned("main")
    assert not hf_plan.is_pinned(COMMIT[:12])
    assert not hf_plan.is_pinned(COMMIT.upper())


def test_a_verification_holds_only_while_revision_size_and_mtime_stay():
    spec = hf_plan.plan_files(listing())[1]
    records = {hf_plan.verify_key(COMMIT, spec, spec["size"], 111): spec["digest"]}
    assert hf_plan.is_verified(records, COMMIT, spec, spec["size"], 111)
    assert not hf_plan.is_verified(records, COMMIT, spec, spec["size"], 112)  # touched since
    assert not hf_plan.is_verified(records, COMMIT, spec, spec["size"] - 1, 111)  # truncated
    assert not hf_plan.is_verified(records, "0" * 40, spec, spec["size"], 111)  # another revision
    other = dict(spec, digest="0" * 64)  # the listing now wants other bytes
    assert not hf_plan.is_verified(records, COMMIT, other, spec["size"], 111)


def test_resume_starts_at_the_last_committed_chunk():
    assert hf_plan.resume_offset(committed=3 * hf_plan.MIB, partial_size=3 * hf_plan.MIB + 777, size=8 * hf_plan.MIB) == 3 * hf_plan.MIB


def test_resume_starts_over_when_the_record_is_beyond_the_partial_file():
    # A power cut can lose file data that a commit record already names.
    assert hf_plan.resume_offset(committed=4 * hf_plan.MIB, partial_size=hf_plan.MIB, size=8 * hf_plan.MIB) == 0
    assert hf_plan.resume_offset(committed=9, partial_size=9, size=8) == 0
    assert hf_plan.resume_offset(committed=-1, partial_size=9, size=80) == 0


def test_a_kill_costs_at_most_one_chunk_of_16_mib():
    assert hf_plan.refetch_bound(64 * hf_plan.MIB) == 16 * hf_plan.MIB
    assert hf_plan.refetch_bound(hf_plan.MIB) == hf_plan.MIB


def test_bytes_needed_counts_what_is_missing_net_of_partials():
    files = hf_plan.plan_files(listing())
    have = {"model-00001-of-00002.safetensors": 4194304, "model-00002-of-00002.safetensors": 1048576}
    assert hf_plan.bytes_needed(files, have) == 100 + 3145728 + 267 + 812


def test_space_problem_names_both_amounts():
    assert hf_plan.free_space_problem(10, 10) is None
    text = hf_plan.free_space_problem(180 * 1024 ** 3, 20 * 1024 ** 3)
    assert "180.0 GiB" in text and "20.0 GiB" in text


def test_git_blob_hasher_gives_git_object_ids():
    # `git hash-object` of an empty file and of "hello\n".
    assert hf_plan.git_blob_hasher(0).hexdigest() == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    hasher = hf_plan.git_blob_hasher(6)
    hasher.update(b"hello\n")
    assert hasher.hexdigest() == "ce013625030ba8dba906f756967f9e9ca394464a"


def test_lfs_files_hash_with_sha256():
    spec = {"kind": "lfs", "size": 3}
    hasher = hf_plan.new_hasher(spec)
    hasher.update(b"abc")
    assert hasher.hexdigest() == hashlib.sha256(b"abc").hexdigest()


REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold-Ablit"


@pytest.mark.parametrize("status,code,message,token,want_code,want_text", [
    (401, None, "Invalid credentials in Authorization header", True, "E_HF_TOKEN", "the Hub does not accept this token"),
    (401, "GatedRepo", "Access to model X is restricted.", False, "E_HF_TOKEN", "no token was given"),
    (403, "GatedRepo", "Access to model X is restricted and you are not in the authorized list.", True, "E_HF_TOKEN",
     "the token's account has not agreed to the repository's terms: open its page, accept, retry"),
    (401, "RepoNotFound", "Repository not found", False, "E_SETTINGS", "has no repository"),
    (404, "RepoNotFound", "Repository not found", True, "E_SETTINGS", "has no repository"),
    (404, "RevisionNotFound", "Invalid rev id: 0123", True, "E_SETTINGS", "has no revision"),
    (500, None, "Internal Error", False, "E_DOWNLOAD", "rerun to resume"),
    (None, None, None, False, "E_DOWNLOAD", "no reply; rerun to resume"),
])
def test_hub_replies_map_to_the_recipes_codes(status, code, message, token, want_code, want_text):
    got_code, what = hf_plan.classify_http_error(status, code, message, REPO, "0123", token)
    assert got_code == want_code
    assert want_text in what


def test_only_a_gatedrepo_403_gives_the_terms_advice_with_the_repositorys_page():
    code, what = hf_plan.classify_http_error(403, "GatedRepo", "restricted", REPO, "r", True,
                                             endpoint="https://huggingface.co")
    assert code == "E_HF_TOKEN" and "open its page, accept, retry (https://huggingface.co/%s)" % REPO in what
    code, what = hf_plan.classify_http_error(403, None, "", REPO, "r", True, path="model.safetensors")
    assert code == "E_DOWNLOAD" and "terms" not in what and "access to model.safetensors denied (HTTP 403)" in what
    # A signed CDN link that expired: answered by the CDN, not the Hub.
    code, what = hf_plan.classify_http_error(403, None, "Signature expired", REPO, "r", True, path="model.safetensors",
                                             elsewhere="cas-bridge.xethub.hf.co")
    assert code == "E_DOWNLOAD" and "terms" not in what and "token" not in what
    assert "model.safetensors on cas-bridge.xethub.hf.co answered HTTP 403" in what


def test_a_file_missing_at_the_revision_is_a_settings_error_without_rerun_advice():
    code, what = hf_plan.classify_http_error(404, "EntryNotFound", "Entry not found", REPO, COMMIT, True,
                                             path="config.json", endpoint="http://mirror:8080")
    assert code == "E_SETTINGS" and "no file config.json at revision %s on http://mirror:8080" % COMMIT in what
    assert "rerun" not in what


def test_a_resolved_revision_counts_only_as_40_hex():
    assert hf_plan.is_commit(COMMIT) == COMMIT and hf_plan.is_commit(COMMIT.upper()) == COMMIT
    for sha in (None, "", "main", COMMIT[:39], COMMIT + "a", "z" * 40, 12):
        assert hf_plan.is_commit(sha) is None


def test_a_401_with_a_token_does_not_blame_a_missing_token():
    dummy, what = hf_plan.classify_http_error(401, "GatedRepo", "", REPO, "r", True)
    assert "no token was given" not in what


def test_progress_line_has_rate_and_eta():
    line = hf_plan.progress_line(done=50 * hf_plan.MIB, total=150 * hf_plan.MIB, elapsed=10)
    assert line["rate"] == 5 * hf_plan.MIB
    assert line["eta_s"] == 20
    assert line["text"] == "50.0 MiB of 150.0 MiB (33.3%) at 5.0 MiB/s, ETA 0m20s"


def test_heartbeat_goes_stale_only_after_the_idle_timeout():
    assert not hf_plan.heartbeat_stale(1000.0, 1100.0, 120)
    assert hf_plan.heartbeat_stale(1000.0, 1121.0, 120)
    assert not hf_plan.heartbeat_stale(None, 5000.0, 120)  # not there yet: the job has just started
    assert not hf_plan.heartbeat_stale(1000.0, 99999.0, 0)  # 0 turns it off


def test_the_token_is_needed_only_for_gated_files_still_to_download():
    assert hf_plan.token_problem(True, False, [], "o/ablit") is None  # verified in place
    assert hf_plan.token_problem(True, True, [{"path": "a"}], "o/ablit") is None
    assert hf_plan.token_problem(False, False, [{"path": "a"}], "o/model") is None
    text = hf_plan.token_problem(True, False, [{"path": "a"}, {"path": "b"}], "o/ablit")
    assert text.startswith("o/ablit is gated and 2 of its files must be downloaded") and "tensorfold_hf_token" in text


def test_the_hand_written_listing_is_what_the_real_client_reads():
    """The fixture is written by hand (fixtures/README.md): the real huggingface_hub client must
    read every entry of it, with the sizes and LFS digests the plan takes from it."""
    from huggingface_hub import hf_api  # in requirements.txt: a missing client fails the test
    for entry in listing():
        parsed = hf_api.RepoFile(**entry) if entry["type"] == "file" else hf_api.RepoFolder(**entry)
        assert parsed.path == entry["path"]
        if entry.get("lfs"):
            assert (parsed.lfs.sha256, parsed.lfs.size) == (entry["lfs"]["oid"], entry["lfs"]["size"])


def test_a_401_without_a_token_says_a_token_is_needed_not_that_it_was_refused():
    # The Hub answers 401 GatedRepo for a gated file asked without a token, and 401 RepoNotFound for a
    # private repository (or none) asked without one: no token was refused.
    code, what = hf_plan.classify_http_error(401, "GatedRepo", "Access to model X is restricted.", REPO, "r", False)
    assert code == "E_HF_TOKEN" and "does not accept" not in what
    assert "gated" in what and "no token was given; set tensorfold_hf_token" in what
    code, what = hf_plan.classify_http_error(401, "RepoNotFound", "Repository not found", REPO, "r", False)
    assert code == "E_SETTINGS" and "has no repository" in what and "token cannot see it" not in what
    assert "no token was given" in what and "tensorfold_hf_token" in what
    code, what = hf_plan.classify_http_error(404, "RepoNotFound", "Repository not found", REPO, "r", True)
    assert "the token cannot see it" in what and "no token was given" not in what


def test_a_file_404_without_the_hubs_code_is_a_missing_file_not_a_missing_repository():
    # The Hub names a missing repository (X-Error-Code: RepoNotFound); a plain 404 for one file (a
    # mirror or proxy that lacks it, where huggingface_hub raises a plain HfHubHTTPError) is that file.
    code, what = hf_plan.classify_http_error(404, None, None, REPO, COMMIT, True, path="config.json",
                                             endpoint="http://mirror:8080")
    assert code == "E_SETTINGS" and "no repository" not in what
    assert "no file config.json at revision %s on http://mirror:8080" % COMMIT in what
    code, what = hf_plan.classify_http_error(404, None, None, REPO, COMMIT, True)  # the API: the repository
    assert "no repository" in what


def test_a_gated_refusal_carries_the_hubs_reason():
    # A request for access still under review is a 403 GatedRepo too: only the Hub's message says so.
    message = "Your request to access model %s is awaiting a review from the repo authors." % REPO
    code, what = hf_plan.classify_http_error(403, "GatedRepo", message, REPO, "r", True)
    assert code == "E_HF_TOKEN" and "awaiting a review" in what and hf_plan.MSG_TOKEN_403 in what
