# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Pure logic of a pinned snapshot download: plan, space, verify keys, resume arithmetic, errors.

Nothing here talks to the network or imports huggingface_hub, so every rule is unit-tested on
recorded Hub listings (tests/unit/plugins/module_utils/fixtures/).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import hashlib
import re

MIB = 1024 * 1024
# A killed download re-fetches at most this much: the bytes after the last committed chunk.
MAX_CHUNK = 16 * MIB
FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")

MSG_TOKEN_401 = "the Hub does not accept this token"
MSG_TOKEN_403 = ("the token's account has not agreed to the repository's terms: "
                 "open its page, accept, retry")


def is_pinned(revision):
    """A revision is pinned when it is a full 40-hex commit (a branch or tag can move)."""
    return bool(FULL_COMMIT.match(revision or ""))


def plan_files(listing, allow_patterns=None):
    """Turn a tree listing (the Hub's JSON entries) into the files to hold locally.

    Each result: ``{path, size, kind, digest}`` where kind is ``lfs`` (digest = sha256 of the
    content) or ``git`` (digest = the git blob id, sha1 of ``blob SIZE\\0`` + content).
    Folders are skipped; ``allow_patterns`` (fnmatch globs) keeps only matching paths.
    """
    files = []
    for entry in listing:
        if entry.get("type", "file") != "file":
            continue
        path = entry["path"]
        if allow_patterns and not any(fnmatch.fnmatch(path, pat) for pat in allow_patterns):
            continue
        lfs = entry.get("lfs")
        if lfs:
            files.append({"path": path, "size": int(lfs.get("size", entry["size"])), "kind": "lfs",
                          "digest": lfs["oid"]})
        else:
            files.append({"path": path, "size": int(entry["size"]), "kind": "git", "digest": entry["oid"]})
    files.sort(key=lambda f: f["path"])
    return files


def safe_relpath(path):
    """Refuse listing paths that would escape the target folder."""
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("unsafe path in the repository listing: %r" % path)
    return path


def verify_key(revision, spec, stat_size, stat_mtime_ns):
    """The key a verification is recorded under: a file counts as verified only while its
    revision, path, size and mtime stay what they were when its bytes were hashed."""
    return "%s|%s|%d|%d" % (revision, spec["path"], stat_size, stat_mtime_ns)


def is_verified(records, revision, spec, stat_size, stat_mtime_ns):
    """True when a recorded verification still holds for this file (no bytes are read)."""
    if stat_size != spec["size"]:
        return False
    return records.get(verify_key(revision, spec, stat_size, stat_mtime_ns)) == spec["digest"]


def resume_offset(committed, partial_size, size):
    """Where a resumed download starts.

    ``committed`` is the last chunk boundary whose bytes were written and recorded; bytes after it
    are not trusted, so they are dropped and fetched again. (After a power cut the bytes before it
    may not be on the disk either: the resumed file then fails its checksum and starts over.)
    A record beyond the file's real length (lost on a crash) or the target size starts over.
    """
    if committed < 0 or committed > partial_size or committed > size:
        return 0
    return committed


def refetch_bound(chunk_size):
    """The most bytes a kill can cost: everything after the last commit, under one chunk."""
    return min(chunk_size, MAX_CHUNK)


def bytes_needed(files, have):
    """Bytes still to fetch. ``have`` maps a path to bytes already good (complete or resumable)."""
    return sum(max(f["size"] - have.get(f["path"], 0), 0) for f in files)


def free_space_problem(needed, free):
    """The E_DISK text when the bytes still needed do not fit, else None."""
    if needed <= free:
        return None
    return "needs %s more for the download but %s is free on the target filesystem" % (
        human_bytes(needed), human_bytes(free))


def human_bytes(n):
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return ("%d %s" % (value, unit)) if unit == "B" else ("%.1f %s" % (value, unit))
        value /= 1024
    return "%d B" % n  # pragma: no cover


def git_blob_hasher(size):
    """A sha1 already fed with git's blob header, so it ends as the file's git oid."""
    digest = hashlib.sha1()
    digest.update(b"blob %d\0" % size)
    return digest


def new_hasher(spec):
    return hashlib.sha256() if spec["kind"] == "lfs" else git_blob_hasher(spec["size"])


def heartbeat_stale(heartbeat_mtime, now, idle_timeout):
    """True when the run that follows a background job stopped touching its heartbeat file.

    A missing heartbeat (None) counts from ``now``: the job has just started. Used by the download
    and the peer server so neither outlives a killed run by more than ``idle_timeout`` seconds.
    """
    if not idle_timeout or idle_timeout <= 0 or heartbeat_mtime is None:
        return False
    return now - heartbeat_mtime > idle_timeout


def token_problem(gated, token_given, download_files, repo_id):
    """The E_HF_TOKEN text when gated files must be downloaded and no token was given, else None.

    Weights verified in place need no token: the recipe serves them as they are.
    """
    if not gated or token_given or not download_files:
        return None
    return ("%s is gated and %d of its files must be downloaded, but no token was given; "
            "set tensorfold_hf_token" % (repo_id, len(download_files)))


def progress_line(done, total, elapsed):
    """The operator's progress: bytes done/total, rate and ETA."""
    rate = done / elapsed if elapsed > 0 else 0.0
    left = max(total - done, 0)
    eta = int(left / rate) if rate > 0 else None
    pct = (100.0 * done / total) if total else 100.0
    return {
        "done": done, "total": total, "rate": rate, "eta_s": eta,
        "text": "%s of %s (%.1f%%) at %s/s, ETA %s" % (
            human_bytes(done), human_bytes(total), pct, human_bytes(int(rate)),
            ("%dm%02ds" % divmod(eta, 60)) if eta is not None else "unknown"),
    }


def classify_http_error(status, error_code, error_message, repo_id, revision, token_given):
    """Map a Hub reply to ``(code, what)``: the recipe's code and the operator's sentence.

    The Hub answers 401 both for a token it rejects ("Invalid credentials in Authorization
    header") and for a gated file asked without a token (X-Error-Code GatedRepo); 403 with
    GatedRepo means a valid token whose account has not accepted the terms. A 401 or 404 with
    RepoNotFound is an unknown (or private) repository, RevisionNotFound an unknown revision.
    """
    error_code = error_code or ""
    error_message = error_message or ""
    if error_code == "RevisionNotFound":
        return "E_SETTINGS", "%s has no revision %s on the Hub" % (repo_id, revision)
    if error_code == "RepoNotFound" or (status == 404 and error_code != "EntryNotFound" and not error_code):
        return "E_SETTINGS", ("the Hub has no repository %s (or it is private and the token cannot see it)"
                              % repo_id)
    if status == 401:
        what = "%s: %s" % (repo_id, MSG_TOKEN_401)
        if not token_given:
            what += " (no token was given; set tensorfold_hf_token)"
        return "E_HF_TOKEN", what
    if status == 403:
        return "E_HF_TOKEN", "%s: %s" % (repo_id, MSG_TOKEN_403)
    if status == 416:
        return "E_DOWNLOAD", "%s: the Hub refused a resume range; rerun to resume" % repo_id
    detail = ("HTTP %s" % status) if status else "no reply"
    if error_message:
        detail += " (%s)" % error_message
    return "E_DOWNLOAD", "%s: download failed: %s; rerun to resume" % (repo_id, detail)
