# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""A pinned Hub snapshot into a plain folder: resumable after a kill, verified once.

Each file's checksum is computed while its bytes arrive (a second thread hashes and commits what
the first one received and wrote), so no file is read back; a resume hashes the bytes already on
disk before the resume point, once. Two files are fetched at once.

huggingface_hub does the Hub's API (revision resolution, tree listing with sizes, git oids and
LFS sha256, URLs, auth headers, error classes) and its configured HTTP session carries the bytes.
The file transfer itself is ours because the library, since 1.18, writes every attempt to a
per-process temporary name and starts a killed file over, and since 2.x checks sizes only.

Layout under ``state_dir`` (same filesystem as ``local_dir`` so the final rename is atomic):
``listing-COMMIT.json`` (the repository's file list at that commit; a pinned commit never
changes, so a complete snapshot needs no Hub request), ``verified.json`` (checksum results keyed
by revision, path, size and mtime), ``partial/KEY.incomplete`` + ``partial/KEY.json`` (one
stable name per file being fetched, and the last chunk boundary that was fsynced).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import threading
import time

import queue
from concurrent import futures

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan

READ_BLOCK = 1024 * 1024
TRANSIENT_RETRIES = 3
# Received bytes waiting for the hashing thread, in batches of about READ_BLOCK: bounds memory.
PIPELINE_DEPTH = 16
# Files fetched at once: with two streams the receiving, writing and hashing of one overlap those
# of the other (hashlib, socket reads and file writes release the GIL), like `hf download`'s workers.
PARALLEL_FILES = 2


class SnapshotError(Exception):
    """A coded failure: ``code`` is one of the recipe's codes, ``what`` the operator's sentence."""

    def __init__(self, code, what):
        super(SnapshotError, self).__init__("%s %s" % (code, what))
        self.code = code
        self.what = what


def load_json(path, default=None):
    """A JSON file's content, or ``default`` when it is missing or does not parse."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return default


def recorded_state(state_dir, revision):
    """What a snapshot's state folder records for ``revision``: ``(listing, records)``, the
    ``listing-COMMIT.json`` and ``verified.json`` contents, each None when missing or unreadable."""
    return (load_json(os.path.join(state_dir, "listing-%s.json" % revision)),
            load_json(os.path.join(state_dir, "verified.json")))


def _write_json(path, data):
    """Write atomically and durably: temp file, fsync, rename."""
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def nearest_existing(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def free_bytes(path):
    st = os.statvfs(nearest_existing(path))
    return st.f_bavail * st.f_frsize


class Progress:
    """Writes the operator's progress (bytes done/total, rate, ETA) to a JSON file, once a second."""

    def __init__(self, path, total):
        self.path = path
        self.total = total
        self.done = 0
        self.started = time.time()
        self.last = 0.0
        self.current = ""
        self._lock = threading.Lock()

    def add(self, count, current=None, force=False):
        with self._lock:
            self.done += count
            if current is not None:
                self.current = current
            now = time.time()
            if not (self.path and (force or now - self.last >= 1.0)):
                return
            self.last = now
            line = hf_plan.progress_line(self.done, self.total, now - self.started)
            line.update({"file": self.current, "finished": False, "updated": now})
            _write_json(self.path, line)

    def finish(self, summary):
        if self.path:
            line = hf_plan.progress_line(self.done, self.total, time.time() - self.started)
            line.update({"file": "", "finished": True, "summary": summary, "updated": time.time()})
            _write_json(self.path, line)


class HashingWriter:
    """Writes one file's bytes as they arrive and hashes them on a second thread, in order.

    The receiving thread calls ``write`` (the bytes go to the file at once) and ``commit`` (every
    half chunk); the second thread updates the checksum and, for a commit, fsyncs the file and
    records the position, so a killed download resumes from there. A commit first waits for the
    one before it, so the bytes on disk beyond the last recorded position stay under two half
    chunks: the one-chunk bound on what a kill re-fetches holds. ``close`` returns the checksum
    object once every byte written was hashed; the file is never read back.
    """

    def __init__(self, fd, hasher, position, on_commit):
        self.fd = fd
        self.hasher = hasher
        self.position = position
        self.on_commit = on_commit
        self.error = None
        self._previous_commit_done = threading.Event()
        self._previous_commit_done.set()
        self._batch = []
        self._batch_bytes = 0
        self._queue = queue.Queue(PIPELINE_DEPTH)
        self._thread = threading.Thread(target=self._work, name="hf_transfer-hash")
        self._thread.daemon = True
        self._thread.start()

    def write(self, block):
        view = memoryview(block)
        while view:
            view = view[os.write(self.fd, view):]
        self.position += len(block)
        self._batch.append(block)
        self._batch_bytes += len(block)
        if self._batch_bytes >= READ_BLOCK:
            self._flush_batch()

    def commit(self):
        """Make every byte written so far durable and record it (done on the hashing thread)."""
        self._flush_batch()
        while not self._previous_commit_done.wait(1.0):
            if not self._thread.is_alive():
                break
        self._previous_commit_done.clear()
        self._queue.put(self.position)

    def close(self):
        self._flush_batch()
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error  # pylint: disable=raising-bad-type
        return self.hasher

    def _flush_batch(self):
        if self._batch:
            self._queue.put(self._batch)
            self._batch, self._batch_bytes = [], 0

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                if self.error is not None:
                    continue  # keep draining so the receiving thread never blocks
                if isinstance(item, list):
                    for block in item:
                        self.hasher.update(block)
                else:
                    os.fsync(self.fd)
                    self.on_commit(item)
            except Exception as exc:  # pylint: disable=broad-except  # handed to the receiving thread
                self.error = exc
            finally:
                if not isinstance(item, list):
                    self._previous_commit_done.set()


class Snapshot:
    """One repository at one revision into ``local_dir``."""

    def __init__(self, repo_id, revision, local_dir, state_dir, token=None, endpoint=None,
                 allow_patterns=None, verify=True, allow_unpinned=False, chunk_size=hf_plan.MAX_CHUNK,
                 progress_file=None, check_mode=False, gated=False):
        self.repo_id = repo_id
        self.revision = revision
        self.local_dir = os.path.abspath(local_dir)
        self.state_dir = os.path.abspath(state_dir)
        self.partial_dir = os.path.join(self.state_dir, "partial")
        self.token = token or None
        self.endpoint = (endpoint or "https://huggingface.co").rstrip("/")
        self.allow_patterns = allow_patterns or None
        self.verify = verify
        self.allow_unpinned = allow_unpinned
        self.chunk_size = hf_plan.refetch_bound(chunk_size)
        self.progress_file = progress_file
        self.check_mode = check_mode
        self.gated = gated
        self.hub_requests = 0
        self.local_bytes_hashed = 0
        self.refetched_bytes = 0
        self.resumed = []
        self.corrupted = []
        self.verified_now = []
        self._hub = None
        self._lock = threading.Lock()

    # --- huggingface_hub, imported only when the Hub is needed ----------------------------------
    def hub(self):
        if self._hub is None:
            os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
            os.environ.setdefault("HF_HOME", os.path.join(self.state_dir, "hf-home"))
            import huggingface_hub  # pylint: disable=import-outside-toplevel
            from huggingface_hub import utils as hf_utils  # pylint: disable=import-outside-toplevel
            api = huggingface_hub.HfApi(endpoint=self.endpoint, token=self.token or False)
            self._hub = (huggingface_hub, hf_utils, api)
        return self._hub

    def _classify(self, exc):
        """Turn a huggingface_hub or transport exception into a SnapshotError."""
        response = getattr(exc, "response", None)
        if response is not None:
            code, what = hf_plan.classify_http_error(
                response.status_code, response.headers.get("X-Error-Code"),
                response.headers.get("X-Error-Message"), self.repo_id, self.revision, bool(self.token))
            return SnapshotError(code, what)
        return SnapshotError("E_DOWNLOAD", "%s: download failed: %s; rerun to resume" % (
            self.repo_id, exc.__class__.__name__))

    def _hub_call(self, func, *args, **kwargs):
        self.hub_requests += 1
        try:
            return func(*args, **kwargs)
        except SnapshotError:
            raise
        except Exception as exc:  # pylint: disable=broad-except  # every library/transport failure is coded
            raise self._classify(exc)

    # --- listing --------------------------------------------------------------------------------
    def resolve_commit(self):
        if hf_plan.is_pinned(self.revision):
            return self.revision
        if not self.allow_unpinned:
            raise SnapshotError("E_SETTINGS", "%s: revision %r is not a full 40-hex commit; pin it (or set allow_unpinned)"
                                % (self.repo_id, self.revision))
        api = self.hub()[2]
        info = self._hub_call(api.model_info, self.repo_id, revision=self.revision)
        return info.sha

    def listing(self, commit):
        path = os.path.join(self.state_dir, "listing-%s.json" % commit)
        cached = load_json(path, None)
        if cached and cached.get("repo_id") == self.repo_id and cached.get("commit") == commit:
            return cached["entries"]
        api = self.hub()[2]

        def fetch():
            entries = []
            for item in api.list_repo_tree(self.repo_id, revision=commit, recursive=True):
                if not hasattr(item, "blob_id"):
                    continue
                entry = {"type": "file", "path": item.path, "size": item.size, "oid": item.blob_id}
                if item.lfs is not None:
                    entry["lfs"] = {"oid": item.lfs.sha256, "size": item.lfs.size,
                                    "pointerSize": item.lfs.pointer_size}
                entries.append(entry)
            return entries

        entries = self._hub_call(fetch)
        if not self.check_mode:
            _write_json(path, {"repo_id": self.repo_id, "commit": commit, "entries": entries})
        return entries

    # --- local state ----------------------------------------------------------------------------
    def _partial_paths(self, commit, spec):
        key = hashlib.sha256(("%s|%s" % (commit, spec["path"])).encode("utf-8")).hexdigest()[:24]
        base = os.path.join(self.partial_dir, key)
        return base + ".incomplete", base + ".json"

    def _partial_offset(self, commit, spec):
        part, rec_path = self._partial_paths(commit, spec)
        record = load_json(rec_path, None)
        if not record or not os.path.exists(part):
            return 0
        if record.get("digest") != spec["digest"] or record.get("size") != spec["size"]:
            return 0
        return hf_plan.resume_offset(int(record.get("committed", 0)), os.path.getsize(part), spec["size"])

    def _hash_file(self, path, spec, limit=None):
        hasher = hf_plan.new_hasher(spec)
        left = spec["size"] if limit is None else limit
        with open(path, "rb") as handle:
            while left > 0:
                block = handle.read(min(READ_BLOCK, left))
                if not block:
                    break
                hasher.update(block)
                left -= len(block)
        with self._lock:
            self.local_bytes_hashed += (spec["size"] if limit is None else limit) - left
        return hasher

    def _record(self, records, commit, spec, final):
        st = os.stat(final)
        records[hf_plan.verify_key(commit, spec, st.st_size, st.st_mtime_ns)] = spec["digest"]

    # --- transfer -------------------------------------------------------------------------------
    def _commit_record(self, rec_path, spec, position):
        _write_json(rec_path, {"path": spec["path"], "digest": spec["digest"], "size": spec["size"],
                               "committed": position})

    def _fetch(self, commit, spec, progress):
        """Fetch one file through a stable partial name, committing every chunk and hashing the bytes
        as they arrive; check the checksum; rename. A resume hashes the bytes already on disk once."""
        hf, hf_utils, dummy = self.hub()
        part, rec_path = self._partial_paths(commit, spec)
        final = os.path.join(self.local_dir, spec["path"])
        attempts = 0
        while True:
            attempts += 1
            offset = self._partial_offset(commit, spec)
            if offset or os.path.exists(part):
                # Bytes after the last commit may be torn after a kill: drop them, fetch them again.
                discarded = os.path.getsize(part) - offset if os.path.exists(part) else 0
                with self._lock:
                    self.refetched_bytes += discarded
                    if offset:
                        self.resumed.append({"path": spec["path"], "from": offset, "discarded": discarded})
            hasher = self._hash_file(part, spec, limit=offset) if offset else hf_plan.new_hasher(spec)
            fd = os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.ftruncate(fd, offset)
                os.lseek(fd, offset, os.SEEK_SET)
                self._commit_record(rec_path, spec, offset)
                try:
                    got, hasher = self._stream(hf, hf_utils, commit, spec, fd, hasher, offset, rec_path, progress)
                except SnapshotError as err:
                    if err.code == "E_DOWNLOAD" and getattr(err, "transient", False) and attempts < TRANSIENT_RETRIES:
                        continue
                    raise
                os.fsync(fd)
            finally:
                os.close(fd)
            if got != spec["size"]:
                raise SnapshotError("E_DOWNLOAD", "%s: %s ended at %d of %d bytes; rerun to resume"
                                    % (self.repo_id, spec["path"], got, spec["size"]))
            if hasher.hexdigest() != spec["digest"]:
                os.unlink(part)
                os.unlink(rec_path)
                if attempts < TRANSIENT_RETRIES:
                    self.corrupted.append({"path": spec["path"], "where": "download"})
                    continue
                raise SnapshotError("E_DOWNLOAD", "%s: %s arrived with a wrong checksum twice; rerun to fetch it again"
                                    % (self.repo_id, spec["path"]))
            break
        parent = os.path.dirname(final)
        with self._lock:
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
        os.chmod(part, 0o444)
        os.replace(part, final)
        os.unlink(rec_path)
        _fsync_dir(parent)
        return final

    def _stream(self, hf, hf_utils, commit, spec, fd, hasher, offset, rec_path, progress):
        """One GET (from ``offset`` with Range when resuming) written to ``fd`` and hashed on the way;
        returns the file's size so far and its checksum object."""
        url = hf.hf_hub_url(self.repo_id, spec["path"], revision=commit, endpoint=self.endpoint)
        headers = hf_utils.build_hf_headers(token=self.token or False)
        headers["Accept-Encoding"] = "identity"
        if offset:
            headers["Range"] = "bytes=%d-" % offset
        session = hf_utils.get_session()
        with self._lock:
            self.hub_requests += 1

        def on_commit(position):
            self._commit_record(rec_path, spec, position)

        writer = HashingWriter(fd, hasher, offset, on_commit)
        since_commit = 0
        try:
            with session.stream("GET", url, headers=headers, timeout=60) as resp:
                status = resp.status_code
                if status == 416 and offset == spec["size"]:
                    return offset, writer.close()
                if status >= 400:
                    code, what = hf_plan.classify_http_error(
                        status, resp.headers.get("X-Error-Code"), resp.headers.get("X-Error-Message"),
                        self.repo_id, self.revision, bool(self.token))
                    raise SnapshotError(code, what)
                if offset and status == 200:
                    # The server ignored the Range: start this file over from its first byte.
                    writer.close()
                    os.ftruncate(fd, 0)
                    os.lseek(fd, 0, os.SEEK_SET)
                    writer = HashingWriter(fd, hf_plan.new_hasher(spec), 0, on_commit)
                # The bytes as they came off the socket (no re-chunking copy); decoded only when a
                # server compressed them despite the identity request.
                encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
                for block in (resp.iter_bytes() if encoded else resp.iter_raw()):
                    writer.write(block)
                    since_commit += len(block)
                    progress.add(len(block), spec["path"])
                    if since_commit >= max(1, self.chunk_size // 2):
                        writer.commit()
                        since_commit = 0
                    if writer.position > spec["size"]:
                        break
        except SnapshotError:
            writer.close()
            raise
        except Exception as exc:  # pylint: disable=broad-except  # transport errors: commit, then retry/resume
            writer.close()
            os.fsync(fd)
            self._commit_record(rec_path, spec, writer.position)
            err = self._classify(exc)
            err.transient = True
            raise err
        return writer.position, writer.close()

    # --- the run --------------------------------------------------------------------------------
    def run(self):
        if not self.check_mode and not os.path.isdir(self.state_dir):
            os.makedirs(self.state_dir, 0o700)
        commit = self.resolve_commit()
        entries = self.listing(commit)
        files = hf_plan.plan_files(entries, self.allow_patterns)
        for spec in files:
            hf_plan.safe_relpath(spec["path"])
        if not files:
            raise SnapshotError("E_SETTINGS", "%s at %s has no file matching %s" % (
                self.repo_id, commit, self.allow_patterns))
        records_path = os.path.join(self.state_dir, "verified.json")
        records = load_json(records_path, {})
        todo, have = [], {}
        for spec in files:
            final = os.path.join(self.local_dir, spec["path"])
            try:
                st = os.stat(final)
            except OSError:
                st = None
            if st is not None and hf_plan.is_verified(records, commit, spec, st.st_size, st.st_mtime_ns):
                have[spec["path"]] = spec["size"]
                continue
            if st is not None and st.st_size == spec["size"]:
                if not self.verify:
                    have[spec["path"]] = spec["size"]
                    continue
                if self._hash_file(final, spec).hexdigest() == spec["digest"]:
                    self._record(records, commit, spec, final)
                    self.verified_now.append(spec["path"])
                    have[spec["path"]] = spec["size"]
                    continue
            if st is not None:
                self.corrupted.append({"path": spec["path"], "where": "local", "size": st.st_size})
            todo.append(spec)
            have[spec["path"]] = self._partial_offset(commit, spec)
        needed = hf_plan.bytes_needed(todo, have)
        lack_token = hf_plan.token_problem(self.gated, bool(self.token), todo, self.repo_id)
        if lack_token:
            raise SnapshotError("E_HF_TOKEN", lack_token)
        result = {
            "revision": commit, "files": [f["path"] for f in files],
            "total_bytes": sum(f["size"] for f in files), "download_files": [f["path"] for f in todo],
            "download_bytes": needed, "downloaded_bytes": 0, "corrupted": self.corrupted,
            "changed": bool(todo) or bool(self.verified_now),
        }
        if self.check_mode:
            result.update(self._summary(False))
            return result
        if todo:
            lack = hf_plan.free_space_problem(needed, free_bytes(self.local_dir))
            if lack:
                raise SnapshotError("E_DISK", "%s into %s %s" % (self.repo_id, self.local_dir, lack))
        for path in (self.local_dir, self.partial_dir):
            if not os.path.isdir(path):
                os.makedirs(path, 0o755)
        progress = Progress(self.progress_file, needed)
        progress.add(0, force=True)
        self.hub()  # imported once, before the workers start
        for spec in todo:
            final = os.path.join(self.local_dir, spec["path"])
            if os.path.lexists(final):
                os.unlink(final)
        with futures.ThreadPoolExecutor(max_workers=PARALLEL_FILES) as pool:
            pending = [pool.submit(self._fetch, commit, spec, progress) for spec in todo]
            try:
                for spec, done in zip(todo, pending):
                    final = done.result()
                    self._record(records, commit, spec, final)
                    self.verified_now.append(spec["path"])
                    _write_json(records_path, records)
            except BaseException:
                for waiting in pending:
                    waiting.cancel()  # files not started yet stay for the rerun
                raise
        if self.verified_now:
            _write_json(records_path, records)
        self._clean_partials()
        result["downloaded_bytes"] = progress.done
        result.update(self._summary(True))
        progress.finish({"downloaded_bytes": progress.done, "files": len(todo)})
        return result

    def _clean_partials(self):
        """Nothing partial stays behind once every planned file is in place."""
        if not os.path.isdir(self.partial_dir):
            return
        for name in os.listdir(self.partial_dir):
            os.unlink(os.path.join(self.partial_dir, name))
        os.rmdir(self.partial_dir)

    def _summary(self, complete):
        return {
            "verified": complete and self.verify,
            "discarded_bytes": self.refetched_bytes,
            "verified_files": self.verified_now, "resumed": self.resumed,
            "hub_requests": self.hub_requests, "local_bytes_hashed": self.local_bytes_hashed,
        }
