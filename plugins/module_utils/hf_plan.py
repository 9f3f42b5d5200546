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
import re

MIB = 1024 * 1024
# A killed download re-fetches at most this much: the bytes after the last committed chunk.
MAX_CHUNK = 16 * MIB
FULL_COMMIT = re.compile(r"^[0-9a-f]{40}$")

HUB = "https://huggingface.co"

MSG_TOKEN_401 = "the Hub does not accept this token"
MSG_TOKEN_403 = ("the token's account has not agreed to the repository's terms: "
                 "open its page, accept, retry")
MSG_TOKEN_REFUSED = "the Hub refuses this token access to the repository"
MSG_TOKEN_HEADER = "the token contains characters not allowed in an HTTP header"

# A file answered with one of these is asked again in the same run, after a pause: the Hub's rate
# limit (429), a request timeout (408) and its front ends' passing failures, as huggingface_hub asks
# them again. Each pause follows the 429's RateLimit header (its window's reset) or Retry-After
# when the reply has one, capped at RETRY_AFTER_CAP_S (a reply may ask for hours); otherwise it
# doubles from BACKOFF_S. One file pauses at most BUSY_RETRIES times and BUSY_WAIT_S seconds in all.
BUSY_STATUSES = (408, 429, 500, 502, 503, 504)
BUSY_RETRIES = 3
BACKOFF_S = 2.0
RETRY_AFTER_CAP_S = 60.0
BUSY_WAIT_S = 120.0


def is_pinned(revision):
    """A revision is pinned when it is a full 40-hex commit (a branch or tag can move)."""
    return bool(FULL_COMMIT.match(revision or ""))


def is_commit(sha):
    """The revision a branch or tag resolved to, as a pinned commit, or None when it is not 40 hex
    characters (a reply without ``sha`` must not become ``listing-None.json``)."""
    if not isinstance(sha, str):
        return None
    sha = sha.lower()
    return sha if FULL_COMMIT.match(sha) else None


def offline_mode(environ):
    """True when huggingface_hub is told to stay offline (HF_HUB_OFFLINE, or TRANSFORMERS_OFFLINE
    when that is unset), read the way the library reads it, so both paths refuse alike."""
    value = environ.get("HF_HUB_OFFLINE") or environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


def token_header_problem(token):
    """The E_HF_TOKEN text when the token cannot go into an HTTP header (non-ASCII or control
    characters; a CR/LF would even add a header), else None. The token itself is never quoted."""
    if token and any(not 0x20 <= ord(char) <= 0x7e for char in token):
        return MSG_TOKEN_HEADER
    return None


def retry_after_seconds(value, now):
    """Seconds a Retry-After header asks to wait (delay-seconds or an HTTP-date), or None when there
    is none or it does not parse. A date in the past asks for no wait."""
    value = (value or "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    # Imported here: the fast path's read carries this file to every box, and email.utils (with
    # calendar, datetime, urllib) is only for a busy Hub's HTTP-date.
    import calendar  # pylint: disable=import-outside-toplevel
    from email.utils import parsedate_tz  # pylint: disable=import-outside-toplevel
    parsed = parsedate_tz(value)
    if parsed is None:
        return None
    when = calendar.timegm(parsed[:9]) - (parsed[9] or 0)
    return max(when - now, 0.0)


RATELIMIT = re.compile(r'^\s*"[^"]*"\s*;\s*r\s*=\s*(\d+)\s*;\s*t\s*=\s*(\d+)')


def ratelimit_reset_seconds(value):
    """Seconds until the rate limit window resets, from the Hub's ``RateLimit: "api";r=0;t=55``
    (IETF draft httpapi-ratelimit-headers), when nothing remains (``r=0``); else None."""
    match = RATELIMIT.match(value or "")
    if not match or int(match.group(1)) != 0:
        return None
    return float(match.group(2))


def busy_pause(retries_done, retry_after, waited):
    """Seconds to wait before asking a busy server (429/5xx) for a file again, or None to give up:
    after BUSY_RETRIES pauses, or when this one would take the file past BUSY_WAIT_S in all."""
    if retries_done >= BUSY_RETRIES:
        return None
    pause = BACKOFF_S * 2 ** retries_done if retry_after is None else retry_after
    pause = min(pause, RETRY_AFTER_CAP_S)
    if waited + pause > BUSY_WAIT_S:
        return None
    return pause


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


SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def redacted_paths(entries):
    """Paths of listing entries whose checksum the Hub withheld: an LFS sha256 that is not 64 hex
    characters, or a git oid that is masked (``*``) or empty. The Hub masks hashes a caller may not
    read (huggingface_hub keeps such listings out of its tree cache); nothing can be verified
    against them, and a pinned commit's listing is recorded for good."""
    found = []
    for entry in entries:
        if entry.get("type", "file") != "file":
            continue
        lfs = entry.get("lfs")
        if lfs:
            bad = not SHA256_HEX.match(str(lfs.get("oid") or "").lower())
        else:
            oid = str(entry.get("oid") or "")
            bad = not oid or "*" in oid
        if bad:
            found.append(entry.get("path"))
    return found


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
    import hashlib  # pylint: disable=import-outside-toplevel  # see new_hasher
    digest = hashlib.sha1()
    digest.update(b"blob %d\0" % size)
    return digest


def new_hasher(spec):
    # hashlib (OpenSSL's library loaded) is imported where a file is hashed: the fast path's read
    # carries this file to every box in every run and hashes nothing.
    import hashlib  # pylint: disable=import-outside-toplevel
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


def classify_http_error(status, error_code, error_message, repo_id, revision, token_given, path=None,
                        endpoint=HUB, elsewhere=None):
    """Map a Hub reply to ``(code, what)``: the recipe's code and the operator's sentence.

    The Hub answers 401 both for a token it rejects ("Invalid credentials in Authorization
    header") and for a gated file asked without a token (X-Error-Code GatedRepo); 403 with
    GatedRepo means a valid token whose account has not accepted the terms, 403 with another
    X-Error-Message a token the Hub refuses for this repository (a fine-grained token without read
    access to it or to public gated repositories), "Access to this resource is disabled." a
    disabled repository. A 403 without the Hub's message is a plain refusal. A 401 or 404 with
    RepoNotFound is an unknown (or private) repository, RevisionNotFound an unknown revision,
    EntryNotFound a file the revision does not have (``path``, when known): no rerun brings it.

    ``elsewhere``: the host that answered when it is not the endpoint (the CDN or storage a
    ``/resolve/`` redirected to, with a signed link). Its refusals say nothing of the token or the
    repository (an expired signature is a 403 with an XML body); a fresh link may pass.
    """
    error_code = error_code or ""
    error_message = error_message or ""
    if elsewhere and status not in BUSY_STATUSES and status != 416:
        return "E_DOWNLOAD", ("%s: the download link of %s on %s answered HTTP %s; the Hub was asked for fresh "
                              "links in this run; rerun to resume" % (repo_id, path or "a file", elsewhere, status))
    if error_code == "RevisionNotFound":
        return "E_SETTINGS", "%s has no revision %s on the Hub" % (repo_id, revision)
    if status == 404 and not error_code and path:
        error_code = "EntryNotFound"  # the Hub names a missing repository; a plain 404 of a file is that file
    if error_code == "RepoNotFound" or (status == 404 and not error_code):
        if not token_given:  # the Hub answers a private repository asked without a token as an unknown one
            return "E_SETTINGS", ("the Hub has no repository %s visible without a token (no token was given; if it "
                                  "is private, set tensorfold_hf_token)" % repo_id)
        return "E_SETTINGS", ("the Hub has no repository %s (or it is private and the token cannot see it)"
                              % repo_id)
    if error_code == "EntryNotFound":
        return "E_SETTINGS", ("%s has no file %s at revision %s on %s (HTTP %s), though its listing names it; "
                              "check the endpoint and the revision"
                              % (repo_id, path or "(unnamed)", revision, endpoint, status))
    if status == 401:
        if not token_given:
            return "E_HF_TOKEN", "%s: the Hub needs a token for this %s (HTTP 401); no token was given; set " \
                                 "tensorfold_hf_token" % (repo_id, "gated repository" if error_code == "GatedRepo"
                                                          else "repository")
        return "E_HF_TOKEN", "%s: %s" % (repo_id, MSG_TOKEN_401)
    if status == 403 and error_code == "GatedRepo":
        # The Hub's message tells a request still under review from none made.
        reason = (" (the Hub: %s)" % error_message[:300]) if error_message else ""
        return "E_HF_TOKEN", "%s: %s (%s/%s)%s" % (repo_id, MSG_TOKEN_403, endpoint.rstrip("/"), repo_id, reason)
    if error_message == "Access to this resource is disabled.":  # whatever the status, as huggingface_hub reads it
        return "E_SETTINGS", "%s: the Hub has disabled this repository (HTTP %s: %s)" % (repo_id, status, error_message)
    if status == 403 and error_message:
        return "E_HF_TOKEN", ("%s: %s (HTTP 403: %s); give the token read access to it (a fine-grained token "
                              "needs read access to this repository or to public gated repositories)"
                              % (repo_id, MSG_TOKEN_REFUSED, error_message))
    if status == 403:
        detail = (": %s" % error_message) if error_message else ""
        advice = ("a rerun asks for a fresh download link, and if it is refused again check that the token may "
                  "read the repository" if path else "check that the token may read the repository")
        return "E_DOWNLOAD", "%s: access to %s denied (HTTP 403%s); %s" % (
            repo_id, path or "the repository", detail, advice)
    if status == 416:
        return "E_DOWNLOAD", "%s: the Hub refused a resume range; rerun to resume" % repo_id
    detail = ("HTTP %s" % status) if status else "no reply"
    if error_message:
        detail += " (%s)" % error_message
    return "E_DOWNLOAD", "%s: download failed: %s; rerun to resume" % (repo_id, detail)
