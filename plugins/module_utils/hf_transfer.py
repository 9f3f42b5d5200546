# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""A pinned Hub snapshot into a plain folder: resumable after a kill, verified once.

Each file's checksum is computed while its bytes arrive (a second thread hashes the pieces the
first one received and wrote), so no file is read back; a resume hashes the bytes already on
disk before the resume point, once. Two files are fetched at once.

huggingface_hub does the Hub's API (revision resolution, URLs, auth headers, error classes; the
tree listing goes through its session page by page, so a busy Hub's pauses stay capped) and its
configured HTTP session carries the bytes
from HTTPS endpoints and through proxies. From a plain-HTTP endpoint no proxy applies to (a peer
on the site network, a mirror) the standard library's ``http.client`` reads the body straight
into reused buffers (``readinto``): a third of the CPU per byte, which decides a peer copy's
speed on a busy host. The file transfer itself is ours because the library, since 1.18, writes
every attempt to a per-process temporary name and starts a killed file over, and since 2.x
checks sizes only.

Durability: a kill of the run loses nothing written, so the resume point is recorded without
waiting for the disk. A power cut can lose what the disk had not yet written, so a verification
made in this boot is recorded with the boot's id (``verified-unsynced.json``) instead of waiting
for the disk; a later run in the same boot fsyncs those files (the kernel has written most back
by then) and moves them into ``verified.json``; after a reboot they count as unverified and are
hashed again. A verification is never trusted for bytes that may not have reached the disk. So
nothing of a fetch in a boot with an id waits for the disk: neither the shards, nor the resume
records, nor ``verified-unsynced.json`` itself, nor the progress file.

Layout under ``state_dir`` (same filesystem as ``local_dir`` so the final rename is atomic):
``listing-COMMIT.json`` (the repository's file list at that commit; a pinned commit never
changes, so a complete snapshot needs no Hub request), ``verified.json`` (checksum results keyed
by revision, path, size and mtime, of files on disk), ``verified-unsynced.json`` (the same, made
in the boot it names), ``partial/KEY.incomplete`` + ``partial/KEY.json`` (one stable name per
file being fetched, and the last chunk boundary written).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import re
import sys
import threading
import time
import zlib

import queue
from concurrent import futures

try:
    import http.client as http_client
    from urllib.parse import quote, urljoin, urlsplit
    from urllib.request import getproxies, proxy_bypass
except ImportError:  # pragma: no cover  (Python 2 is not supported on hosts)
    http_client = None

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_records
from ansible_collections.glm53.tensorfold.plugins.module_utils.hf_records import UNSYNCED, load_json

READ_BLOCK = 1024 * 1024
# Attempts of one file whose connection broke (each resumes from the bytes on disk). An attempt
# that brought PROGRESS_RESET bytes or more starts the count again, as huggingface_hub's http_get
# does whenever bytes arrived: a multi-GB file over a link that breaks now and then goes on.
TRANSIENT_RETRIES = 3
PROGRESS_RESET = 1024 * 1024
# Fetches of one file whose bytes arrive with a wrong checksum: once more, then E_DOWNLOAD.
CHECKSUM_ATTEMPTS = 2
# The pause before asking a busy server again (hf_plan.busy_pause decides how long); a test hook.
busy_sleep = time.sleep
# Errors of a full filesystem: E_DISK, never retried.
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# A plain-HTTP body is read into PIECE-sized buffers, PIECES of them per file: the hashing
# thread hands each back when hashed, so a file being fetched holds at most 8 MiB. (4 MiB pieces
# cost four times the page faults and left the data out of the cache between write and hash;
# 256 KiB pieces saved 5% of the CPU on 1 GiB but cost 30% more system time on 4 GiB, when the
# page cache is under pressure, as with any real checkpoint.)
PIECE = 1024 * 1024
PIECES = 8
# The most bytes one write() hands the kernel: a piece is written in slices. Whole 1 MiB writes
# cost a 4 GiB copy here 6.1 s of system time against 3.6 s in 128 KiB slices (docs/development.md).
WRITE_SLICE = 128 * 1024
# A piece is handed on after this many seconds even when not full (a slow link).
PIECE_WAIT = 0.5
# Pieces (or the session's blocks) waiting for the hashing thread: bounds memory.
PIPELINE_DEPTH = 16
REDIRECTS = 5
# Files fetched at once: with two streams the receiving, writing and hashing of one overlap those
# of the other (hashlib, socket reads and file writes release the GIL), like `hf download`'s workers.
PARALLEL_FILES = 2


class SnapshotError(Exception):
    """A coded failure: ``code`` is one of the recipe's codes, ``what`` the operator's sentence."""

    def __init__(self, code, what):
        super(SnapshotError, self).__init__("%s %s" % (code, what))
        self.code = code
        self.what = what


def _write_json(path, data, durable=True):
    """Write atomically (temp file, rename); durably (fsync before the rename) unless told not to:
    a resume record only has to survive a kill, which loses nothing written."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as handle:
            json.dump(data, handle, sort_keys=True)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)  # a full disk must not keep half a file
        except OSError:
            pass
        if exc.filename is None:  # a write or close names no file: the operator needs it
            raise OSError(exc.errno, exc.strerror, path)
        raise


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
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

    def take_back(self, count, extra_total=0):
        """A file started over: its bytes counted so far are not counted twice, and bytes an earlier
        run had fetched (not in the total) are now to fetch too, so ``done`` never passes ``total``."""
        with self._lock:
            self.done -= count
            self.total += extra_total

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
            self._write(line)

    def finish(self, summary):
        if self.path:
            line = hf_plan.progress_line(self.done, self.total, time.time() - self.started)
            line.update({"file": "", "finished": True, "summary": summary, "updated": time.time()})
            self._write(line)

    def _write(self, line):
        # For the operator's eyes only: no wait for the disk (an fsync commits the journal, which
        # can wait for the shards' own write-back), and a full disk must not turn the run's coded
        # failure into a crash.
        try:
            _write_json(self.path, line, durable=False)
        except OSError:
            pass


class PieceHasher:
    """Hashes one file's pieces on a thread of its own, in the order they arrived.

    The receiving thread writes each piece to the file, then hands it over with ``update`` (a
    piece is a bytes-like object or a list of them; ``release``, when given, is called once it is
    hashed, so its buffer can be filled again). ``close`` returns the checksum object once every
    piece was hashed: the file is never read back. A failure of the hashing thread is raised by
    ``close``; until then the thread keeps taking and releasing pieces, so the receiving thread
    never waits on it forever.
    """

    def __init__(self, hasher):
        self.hasher = hasher
        self.error = None
        self._queue = queue.Queue(PIPELINE_DEPTH)
        self._thread = threading.Thread(target=self._work, name="hf_transfer-hash")
        self._thread.daemon = True
        self._thread.start()

    def update(self, piece, release=None):
        self._queue.put((piece, release))

    def close(self):
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error  # pylint: disable=raising-bad-type
        return self.hasher

    def _work(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            piece, release = item
            try:
                if self.error is None:
                    for block in (piece if isinstance(piece, list) else (piece,)):
                        self.hasher.update(block)
            except Exception as exc:  # pylint: disable=broad-except  # handed to the receiving thread
                self.error = exc
            finally:
                if release is not None:
                    release()


def write_all(fd, piece):
    """Write a bytes-like object (or a list of them) to ``fd`` whole, WRITE_SLICE bytes at most a
    call; return the byte count."""
    count = 0
    for block in (piece if isinstance(piece, list) else (piece,)):
        view = memoryview(block)
        count += len(view)
        while view:
            view = view[os.write(fd, view[:WRITE_SLICE]):]
    return count


def plain_http(url, use_proxy=True):
    """True when ``url`` is plain HTTP and no proxy applies to its host: its body is read with
    ``http.client`` straight into reused buffers instead of through the library's session.
    ``use_proxy=False``: the host is reached directly whatever the environment's proxies say."""
    if http_client is None:
        return False
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    if not use_proxy:
        return True
    proxies = getproxies()
    return not (("http" in proxies or "all" in proxies) and not proxy_bypass(parts.hostname))


def shown_url(url):
    """``url`` as a message may show it: scheme, host, port and path; no user, password or query (a
    signed link's credentials: X-Amz-Signature, a temporary key's X-Amz-Security-Token)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return "%s://%s%s%s" % (parts.scheme, parts.hostname or "", ":%d" % port if port else "", parts.path)


def other_host(endpoint, url):
    """The host (with its port when not the scheme's) that ``url`` names when its origin is not the
    endpoint's, else None. Only scheme, host and port: a signed link's query never shows."""
    if not url:
        return None
    ports = {"http": 80, "https": 443}
    there, ours = urlsplit(str(url)), urlsplit(endpoint)
    try:
        origins = [(p.scheme, (p.hostname or "").lower(), p.port or ports.get(p.scheme)) for p in (there, ours)]
    except ValueError:  # a port that is no number
        return there.hostname or "another host"
    if origins[0] == origins[1]:
        return None
    scheme, host, port = origins[0]
    return host if port == ports.get(scheme) else "%s:%s" % (host, port)


def deflate_decoder(first):
    """deflate is zlib-wrapped by the RFC but raw from some servers: the first two bytes tell."""
    wrapped = len(first) == 2 and first[0] & 0x0f == 8 and ((first[0] << 8) | first[1]) % 31 == 0
    return zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)


class NotPlain(Exception):
    """A plain-HTTP request was redirected to HTTPS or through a proxy: the session carries it."""


class PlainResponse:
    """One GET over plain HTTP with ``http.client``, redirects followed (the credentials only to
    the origin they were meant for, as huggingface_hub's session does). ``pieces`` reads the body
    into ``PIECES`` buffers of ``PIECE`` bytes, each handed back by the hashing thread."""

    def __init__(self, url, headers, timeout, use_proxy=True):
        self.conn = None
        origin = urlsplit(url)[:2]
        headers = dict(headers)
        for dummy in range(REDIRECTS + 1):
            parts = urlsplit(url)
            if parts[:2] != origin:
                headers = dict((k, v) for k, v in headers.items() if k.lower() != "authorization")
            self.close()
            self.conn = http_client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
            self.conn.request("GET", (parts.path or "/") + ("?" + parts.query if parts.query else ""), headers=headers)
            self.resp = self.conn.getresponse()
            self.status_code = self.resp.status
            self.headers = self.resp.msg  # case-insensitive, like the session's
            self.url = url
            location = self.headers.get("Location")
            if self.status_code in (301, 302, 303, 307, 308) and location:
                self.resp.read()
                url = urljoin(url, location)
                if not plain_http(url, use_proxy):
                    self.close()
                    raise NotPlain(url)
                continue
            return
        raise SnapshotError("E_DOWNLOAD", "more than %d redirects for %s; check the endpoint"
                            % (REDIRECTS, shown_url(url)))

    def pieces(self, room=lambda: PIECE):
        """The body in pieces of at most ``room()`` bytes (asked before each piece: the bytes to the
        next resume point, so pieces end on it), each read straight into a pooled buffer.
        A piece ends when full or after PIECE_WAIT seconds, so on a slow link progress and resume
        points still move; with a known length each read takes what the socket has (``readinto1``).
        A body compressed despite the identity request is decoded, as the session does."""
        coding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if coding not in ("", "identity"):
            yield from self._decoded(coding, room)
            return
        pool = queue.Queue()
        for dummy in range(PIECES):
            pool.put(bytearray(PIECE))
        remaining = None if self.resp.chunked else self.resp.length
        read = self.resp.readinto if remaining is None else self.resp.fp.readinto1
        ended = False
        while not ended and remaining != 0:
            buf = pool.get()
            most = min(room(), PIECE)
            view = memoryview(buf)[:most if remaining is None else min(most, remaining)]
            filled = 0
            began = time.time()
            while filled < len(view):
                count = read(view[filled:])
                if not count:
                    ended = True
                    break
                filled += count
                if time.time() - began >= PIECE_WAIT:
                    break
            if remaining is not None:
                remaining -= filled
            if filled:
                yield view[:filled], lambda buf=buf: pool.put(buf)
            else:
                pool.put(buf)
        if ended and remaining:  # the connection ended before Content-Length bytes
            raise ConnectionError("the body ended %d bytes short" % remaining)

    def _decoded(self, coding, room):
        """A gzip or deflate body, decoded in pieces of at most ``room()`` bytes (so a small body
        cannot swell without bound in memory); any other coding is refused."""
        if coding in ("gzip", "x-gzip"):
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            decoder = None  # zlib-wrapped as the RFC says, or raw as some servers send it: see below
        else:
            raise SnapshotError("E_DOWNLOAD", "%s sent a body with Content-Encoding %s although none was asked "
                                "for; check the endpoint" % (urlsplit(self.url).netloc, coding))
        while True:
            data = self.resp.read(PIECE)  # http.client raises IncompleteRead when the body ends short
            if not data:
                break
            if decoder is None:
                decoder = deflate_decoder(bytearray(data[:2]))
            while data:
                out = decoder.decompress(data, max(1, min(room(), PIECE)))
                data = decoder.unconsumed_tail
                if out:
                    yield out, None
        if decoder is not None:
            tail = decoder.flush()
            if tail:
                yield tail, None
            if not decoder.eof:
                raise ConnectionError("the compressed body ended early")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def served_size(status, headers):
    """The whole file's size a GET's answer gives: ``Content-Range``'s total of a 206 or a 416
    (``bytes 0-99/2048``, ``bytes */2048``), a 200's ``Content-Length`` when its body is not
    encoded; None when it says none."""
    if status in (206, 416):
        match = re.match(r"^\s*bytes\s+(?:\d+-\d+|\*)/(\d+)\s*$", headers.get("Content-Range") or "")
        return int(match.group(1)) if match else None
    if status == 200 and (headers.get("Content-Encoding") or "identity").strip().lower() == "identity":
        length = (headers.get("Content-Length") or "").strip()
        return int(length) if length.isdigit() else None
    return None


def range_start(headers):
    """The first byte a 206's ``Content-Range`` (``bytes 100-199/2048``) says its body holds, or None."""
    match = re.match(r"^\s*bytes\s+(\d+)-\d+/(?:\d+|\*)\s*$", headers.get("Content-Range") or "")
    return int(match.group(1)) if match else None


def session_pieces(resp, most=READ_BLOCK):
    """The session's body blocks as they came off the socket (no re-chunking copy), in lists of
    about READ_BLOCK (at most ``most``) bytes; decoded only when a server compressed them despite the identity request."""
    encoded = resp.headers.get("Content-Encoding", "identity").lower() not in ("", "identity")
    batch, size = [], 0
    for block in (resp.iter_bytes() if encoded else resp.iter_raw()):
        batch.append(block)
        size += len(block)
        if size >= min(most, READ_BLOCK):
            yield batch, None
            batch, size = [], 0
    if batch:
        yield batch, None


class Snapshot:
    """One repository at one revision into ``local_dir``."""

    def __init__(self, repo_id, revision, local_dir, state_dir, token=None, endpoint=None,
                 allow_patterns=None, verify=True, allow_unpinned=False, chunk_size=hf_plan.MAX_CHUNK,
                 progress_file=None, check_mode=False, gated=False, listing=None, use_proxy=True):
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
        self.given_listing = listing
        # False: a plain-HTTP endpoint (a peer on the site network) is reached directly, so the
        # copy never needs the library's session, which is what honours the environment's proxies.
        self.use_proxy = use_proxy
        self.hub_requests = 0
        self.local_bytes_hashed = 0
        self.refetched_bytes = 0
        self.resumed = []
        self.corrupted = []
        self.verified_now = []
        self._hub = None
        self._hub_lock = threading.Lock()
        self._lock = threading.Lock()
        self.boot = hf_records.boot_id()
        self.in_run = False
        self.pending_listing = None
        self.settled = False

    # --- huggingface_hub, imported only when the Hub is needed ----------------------------------
    def hub(self):
        with self._hub_lock:  # a worker whose plain request was redirected to HTTPS may ask first
            if self._hub is None:
                os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
                os.environ.setdefault("HF_HOME", os.path.join(self.state_dir, "hf-home"))
                try:
                    import huggingface_hub  # pylint: disable=import-outside-toplevel
                    from huggingface_hub import utils as hf_utils  # pylint: disable=import-outside-toplevel
                except ImportError as exc:
                    raise SnapshotError("E_DEPENDENCY", "huggingface_hub cannot be imported by %s: %s (the "
                                                        "weights_fetch role puts it on the hosts that download from "
                                                        "the Hub)" % (sys.executable, exc))
                api = huggingface_hub.HfApi(endpoint=self.endpoint, token=self.token or False)
                self._hub = (huggingface_hub, hf_utils, api)
            return self._hub

    def file_request(self, commit, spec):
        """The URL and headers of one file's GET. From a plain-HTTP endpoint (a peer of the site, a
        mirror) they are the Hub's own resolve URL and bearer header, made here: huggingface_hub's
        import (about 0.2 s of CPU) is then paid only where its session carries the bytes."""
        if plain_http(self.endpoint, self.use_proxy):
            url = "%s/%s/resolve/%s/%s" % (self.endpoint, self.repo_id, quote(commit, safe=""), quote(spec["path"]))
            return url, ({"Authorization": "Bearer %s" % self.token} if self.token else {})
        hf, hf_utils = self.hub()[:2]
        return (hf.hf_hub_url(self.repo_id, spec["path"], revision=commit, endpoint=self.endpoint),
                hf_utils.build_hf_headers(token=self.token or False))

    def _classify(self, exc, path=None):
        """Turn a huggingface_hub or transport exception into a SnapshotError; ``transient`` says
        whether asking again in this run may help."""
        names = set(cls.__name__ for cls in type(exc).__mro__)
        if "OfflineModeIsEnabled" in names:
            return SnapshotError("E_SETTINGS", self._offline_text(
                ("%s must be fetched" % path) if path else "the Hub must be asked"))
        if self.token and names & {"UnicodeEncodeError", "LocalProtocolError"}:
            # The token went into a header it cannot be in; the exception's text may quote it.
            return SnapshotError("E_HF_TOKEN", "%s: %s" % (self.repo_id, hf_plan.MSG_TOKEN_HEADER))
        response = getattr(exc, "response", None)
        if response is not None:
            return self._http_error(response.status_code, response.headers, path, getattr(response, "url", None))
        err = SnapshotError("E_DOWNLOAD", "%s: download failed: %s; rerun to resume" % (
            self.repo_id, exc.__class__.__name__))
        err.transient = True
        # What huggingface_hub's http_backoff asks again: a timeout, a reset, refused or unresolved
        # connection, a reply cut short (httpx's errors; OSError and http.client's for the plain path).
        err.network = bool(names & {"TimeoutException", "NetworkError", "RemoteProtocolError", "OSError",
                                    "HTTPException"})
        return err

    def _http_error(self, status, headers, path=None, url=None):
        """``url``: the request that got this answer (after redirects), to tell the Hub's own
        answers from those of the CDN it redirected to."""
        # A CDN (S3, CloudFront, cas-bridge) sends none of the Hub's X-Error-* headers: an answer with
        # them is the Hub's, even from another host (a mirror that redirects to huggingface.co).
        hubs = headers.get("X-Error-Code") or headers.get("X-Error-Message")
        elsewhere = None if hubs else other_host(self.endpoint, url)
        code, what = hf_plan.classify_http_error(
            status, headers.get("X-Error-Code"), headers.get("X-Error-Message"), self.repo_id, self.revision,
            bool(self.token), path=path, endpoint=self.endpoint, elsewhere=elsewhere)
        err = SnapshotError(code, what)
        if elsewhere and code == "E_DOWNLOAD" and status not in hf_plan.BUSY_STATUSES:
            err.transient = err.fresh_link = True  # the next attempt asks the Hub again: a fresh signed link
        if status in hf_plan.BUSY_STATUSES:
            err.busy = True
            reset = hf_plan.ratelimit_reset_seconds(headers.get("RateLimit")) if status == 429 else None
            err.retry_after = reset if reset is not None else hf_plan.retry_after_seconds(
                headers.get("Retry-After"), time.time())
        return err

    def _offline_text(self, need):
        return ("%s: offline mode (HF_HUB_OFFLINE) is set and the files at %s are not all present and verified: "
                "%s; unset HF_HUB_OFFLINE, or carry the files and their listing in (a bundle)"
                % (self.repo_id, self.revision, need))

    def _before_request(self, need):
        """Refuse before a request that cannot go out: offline mode, or a token no header can carry."""
        if hf_plan.offline_mode(os.environ):
            raise SnapshotError("E_SETTINGS", self._offline_text(need))
        problem = hf_plan.token_header_problem(self.token)
        if problem:
            raise SnapshotError("E_HF_TOKEN", "%s: %s" % (self.repo_id, problem))

    def _hub_call(self, need, func, *args, **kwargs):
        """One Hub API request; a busy answer (429/5xx) is asked again after the same capped pauses
        as a file's (hf_plan.busy_pause), so no reply's Retry-After holds the run longer. So is a
        request the network failed (a timeout, a reset or refused connection, a name that did not
        resolve), as huggingface_hub's http_backoff asks again those of HfApi's listing."""
        pauses = [0, 0.0]
        while True:
            self._before_request(need)
            self.hub_requests += 1
            try:
                return func(*args, **kwargs)
            except Exception as exc:  # pylint: disable=broad-except  # every library/transport failure is coded
                err = exc if isinstance(exc, SnapshotError) else self._classify(exc)
            if getattr(err, "network", False) and not getattr(err, "busy", False):
                err.busy, err.retry_after = True, None
            self._pause_if_busy(err, pauses)

    @staticmethod
    def _pause_if_busy(err, pauses):
        """Wait before asking a busy server again (``pauses``: [pauses so far, seconds of them], kept
        up to date); raise ``err`` when it is not a busy answer, or with the count when the pauses
        are spent (hf_plan.busy_pause)."""
        if not getattr(err, "busy", False):
            raise err
        pause = hf_plan.busy_pause(pauses[0], err.retry_after, pauses[1])
        if pause is None:
            raise SnapshotError(err.code, "%s (%d attempts, %d s of pauses)" % (err.what, pauses[0] + 1, pauses[1]))
        pauses[0] += 1
        pauses[1] += pause
        busy_sleep(pause)

    # --- listing --------------------------------------------------------------------------------
    def resolve_commit(self):
        if hf_plan.is_pinned(self.revision):
            return self.revision
        if not self.allow_unpinned:
            raise SnapshotError("E_SETTINGS", "%s: revision %r is not a full 40-hex commit; pin it (or set allow_unpinned)"
                                % (self.repo_id, self.revision))
        api = self.hub()[2]
        info = self._hub_call("revision %r must be resolved on the Hub" % self.revision,
                              api.model_info, self.repo_id, revision=self.revision)
        commit = hf_plan.is_commit(getattr(info, "sha", None))
        if commit is None:
            raise SnapshotError("E_SETTINGS", "%s: the Hub resolved revision %r to no 40-hex commit (%s); pin a full "
                                "commit" % (self.repo_id, self.revision, repr(getattr(info, "sha", None))[:60]))
        return commit

    def listing(self, commit):
        """The file list at ``commit``: recorded, given or asked of the Hub. Within ``run`` a new one
        is kept in ``pending_listing``, recorded once the space check passed."""
        path = os.path.join(self.state_dir, "listing-%s.json" % commit)
        cached = load_json(path, None)
        if cached and cached.get("repo_id") == self.repo_id and cached.get("commit") == commit and \
                not hf_plan.redacted_paths(cached.get("entries") or []):
            return cached["entries"]
        given = self.given_listing or {}
        if given.get("repo_id") == self.repo_id and given.get("commit") == commit and isinstance(given.get("entries"), list):
            # Another host's record of this pinned commit (a peer copy takes the seed's): the same
            # file list the Hub would give, with no request.
            entries = given["entries"]
        else:
            entries = self._ask_listing(commit)
            redacted = hf_plan.redacted_paths(entries)
            if redacted:
                # Never recorded: once the token may read the repository, the next run asks again.
                raise SnapshotError("E_HF_TOKEN", "%s: the Hub's listing at %s withholds the checksums of %d files (%s "
                                    "first), as it does where the token may not read them; accept the repository's "
                                    "terms on its page or use a token with read access, then rerun"
                                    % (self.repo_id, commit, len(redacted), redacted[0]))
        if not self.check_mode:
            record = (path, {"repo_id": self.repo_id, "commit": commit, "entries": entries})
            if self.in_run:
                self.pending_listing = record
            else:
                _write_json(*record)
        return entries

    def _ask_listing(self, commit):
        """The Hub's file list at ``commit``, page by page (``Link: <...>; rel="next"``), each page one
        request through huggingface_hub's session with its headers and error types. Not HfApi's
        list_repo_tree: that one asks a busy Hub again after whatever pause the reply names
        (Retry-After: 3600 is an hour, five times), where _hub_call's pauses are capped."""
        hf_utils = self.hub()[1]
        url = "%s/api/models/%s/tree/%s" % (self.endpoint, self.repo_id, quote(commit, safe=""))
        params = {"recursive": "true", "expand": "false"}
        found = []

        def page(url, params):
            # The token goes to the endpoint's origin only, as a redirect's Authorization does.
            ours = not other_host(self.endpoint, url)
            headers = hf_utils.build_hf_headers(token=(self.token or False) if ours else False)
            resp = hf_utils.get_session().get(url, headers=headers, params=params, timeout=60)
            hf_utils.hf_raise_for_status(resp)
            try:
                items = resp.json()
            except ValueError:
                items = None
            if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
                # A 200 that is no listing: a proxy's or a captive portal's page, a mirror's other API.
                raise SnapshotError("E_DOWNLOAD", "%s: %s answered the request for the file listing with no file "
                                    "listing (%s); check the endpoint and the proxy settings, then rerun"
                                    % (self.repo_id, self.endpoint,
                                       (resp.headers.get("Content-Type") or "no type")[:60]))
            after = (resp.links.get("next") or {}).get("url")
            return items, urljoin(str(resp.url), after) if after else None  # RFC 8288: relative to the page

        while url:
            items, url = self._hub_call("its listing is not in %s" % self.state_dir, page, url, params)
            params = None  # a next link carries its own query
            for item in items:
                if item.get("type") != "file":
                    continue
                entry = {"type": "file", "path": item["path"], "size": item["size"], "oid": item["oid"]}
                lfs = item.get("lfs")
                if lfs:
                    entry["lfs"] = {"oid": lfs["oid"], "size": lfs["size"], "pointerSize": lfs.get("pointerSize")}
                found.append(entry)
        return found

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

    def _remember(self, records, unsynced, commit, spec, final):
        """Record a verification: under this boot's id (the bytes may still be in the page cache
        only), or, with no boot id, in ``verified.json`` once the file is on the disk."""
        if self.boot:
            self._record(unsynced, commit, spec, final)
        else:
            _fsync_path(final)
            self._record(records, commit, spec, final)

    def _settle(self, records):
        """Move the verifications an earlier run of this boot made into ``verified.json`` once their
        files are on the disk (fsync: by now the kernel has written most of them back). Returns
        the records to work with; an earlier boot's are dropped, their files are hashed again. The
        run writes them (``_save_settled``) once the space check passed."""
        unsynced = hf_records.unsynced_records(self.state_dir)
        path = os.path.join(self.state_dir, UNSYNCED)
        if not unsynced:
            if os.path.exists(path) and not self.check_mode:
                os.unlink(path)
            return records
        merged = dict(records)
        merged.update(unsynced)
        if self.check_mode:
            return merged
        for key in unsynced:
            revision, rest = key.split("|", 1)
            relpath, size, mtime_ns = rest.rsplit("|", 2)
            final = os.path.join(self.local_dir, relpath)
            try:
                st = os.stat(final)
            except OSError:
                continue
            if revision and (st.st_size, st.st_mtime_ns) == (int(size), int(mtime_ns)):
                _fsync_path(final)
                records[key] = unsynced[key]
        self.settled = True  # the run writes verified.json once the space check passed
        return records

    def _save_settled(self, records):
        if self.settled:
            _write_json(os.path.join(self.state_dir, "verified.json"), records)
            os.unlink(os.path.join(self.state_dir, UNSYNCED))
            self.settled = False

    def _save_unsynced(self, unsynced):
        """Written without an fsync: the records count in this boot only, and a kill loses nothing
        written; after a power cut they are void whatever reached the disk (a torn file reads as
        none), so waiting for the disk (a journal commit, behind the shards' write-back) buys nothing."""
        if unsynced:
            _write_json(os.path.join(self.state_dir, UNSYNCED), {"boot_id": self.boot, "records": unsynced},
                        durable=False)

    # --- transfer -------------------------------------------------------------------------------
    def _commit_record(self, rec_path, spec, position):
        """Rewrite the resume record in place with one write of the same length every time (JSON
        padded with spaces, within one page): a kill leaves the old text or the new one whole, and
        a commit makes no new file and no rename (a metadata change the journal would carry)."""
        record = {"path": spec["path"], "digest": spec["digest"], "size": spec["size"]}
        widest = len(json.dumps(dict(record, committed=spec["size"]), sort_keys=True)) + 1
        text = json.dumps(dict(record, committed=position), sort_keys=True)
        fd = os.open(rec_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, text.ljust(widest).encode("utf-8"), 0)
        finally:
            os.close(fd)

    def disk_error(self, exc, path, name=None):
        """An OSError of a file or state write as the operator's failure: E_DISK when the filesystem
        is full (the bytes written stay for the next run), E_DOWNLOAD otherwise; never retried."""
        path = path or getattr(exc, "filename", None)
        reason = exc.strerror or exc.__class__.__name__
        if not path:
            what = "%s: cannot write in %s: %s" % (self.repo_id, self.state_dir, reason)
        else:
            folder = path if name is not None and os.path.isdir(path) else os.path.dirname(path)
            what = "%s: cannot write %s in %s: %s" % (self.repo_id, name or os.path.basename(path), folder, reason)
        return SnapshotError("E_DISK" if exc.errno in DISK_FULL else "E_DOWNLOAD", what)

    def _fetch(self, commit, spec, progress):
        """Fetch one file through a stable partial name, committing every chunk and hashing the bytes
        as they arrive; check the checksum; rename. A resume hashes the bytes already on disk once.
        A broken connection is resumed (TRANSIENT_RETRIES attempts, counted again after an attempt that
        brought PROGRESS_RESET bytes; one that brought none waits first); a busy server (429/5xx)
        is asked again after a pause (hf_plan.busy_pause); a wrong checksum fetches the file once more."""
        part, rec_path = self._partial_paths(commit, spec)
        final = os.path.join(self.local_dir, spec["path"])
        cuts = wrong = 0
        pauses = [0, 0.0]  # a busy server's pauses for this file: how many, how long in all
        counted = {"done": 0, "first": None}  # this file's bytes in this run's progress, where it began
        last = None  # where the last attempt began
        wait = False  # the last attempt broke (not on a refused CDN link: a fresh one is asked at once)
        while True:
            offset = self._partial_offset(commit, spec)
            if last is not None and offset - last >= PROGRESS_RESET:
                cuts = 0  # the last attempt moved the file on: its break counts as the first
            elif wait and offset == last:
                # Nothing came (a refused connection, a name that did not resolve, a timeout): wait a
                # little before asking again, as huggingface_hub does, so a passing outage passes.
                busy_sleep(hf_plan.BACKOFF_S * 2 ** (cuts - 1))
            last, wait = offset, False
            if counted["first"] is None:
                counted["first"] = offset
            if offset or os.path.exists(part):
                # Bytes after the last commit are not trusted: drop them, fetch them again.
                discarded = os.path.getsize(part) - offset if os.path.exists(part) else 0
                with self._lock:
                    self.refetched_bytes += discarded
                    if offset:
                        self.resumed.append({"path": spec["path"], "from": offset, "discarded": discarded})
            hasher = self._hash_file(part, spec, limit=offset) if offset else hf_plan.new_hasher(spec)
            fd = None
            try:
                fd = os.open(part, os.O_WRONLY | os.O_CREAT, 0o644)
                os.ftruncate(fd, offset)
                os.lseek(fd, offset, os.SEEK_SET)
                self._commit_record(rec_path, spec, offset)
            except OSError as exc:
                if fd is not None:
                    os.close(fd)
                raise self.disk_error(exc, part, spec["path"])
            try:
                try:
                    got, hasher = self._stream(commit, spec, fd, hasher, offset, rec_path, progress, counted)
                except SnapshotError as err:
                    if getattr(err, "other_bytes", False):
                        self._drop_partial(part, rec_path)  # a rerun starts the file over
                        raise
                    if getattr(err, "transient", False) and cuts + 1 < TRANSIENT_RETRIES:
                        cuts += 1
                        wait = not getattr(err, "fresh_link", False)
                        continue
                    self._pause_if_busy(err, pauses)
                    continue
                if self.boot is None:
                    os.fsync(fd)  # no boot id to record the verification under: on the disk first
            except OSError as exc:
                raise self.disk_error(exc, part, spec["path"])
            finally:
                os.close(fd)
            if got > spec["size"]:
                # The endpoint serves other bytes than the listing says: a rerun would get them again.
                self._drop_partial(part, rec_path)
                raise self._other_bytes(commit, spec, "sent more bytes")
            if got != spec["size"]:
                raise SnapshotError("E_DOWNLOAD", "%s: %s ended at %d of %d bytes; rerun to resume"
                                    % (self.repo_id, spec["path"], got, spec["size"]))
            if hasher.hexdigest() != spec["digest"]:
                self._drop_partial(part, rec_path)
                wrong += 1
                if wrong < CHECKSUM_ATTEMPTS:
                    self.corrupted.append({"path": spec["path"], "where": "download"})
                    self._start_over(progress, counted)
                    continue
                raise SnapshotError("E_DOWNLOAD", "%s: %s arrived with a wrong checksum %s; rerun to fetch it "
                                    "again" % (self.repo_id, spec["path"], {2: "twice"}.get(wrong, "%d times" % wrong)))
            break
        parent = os.path.dirname(final)
        try:
            with self._lock:
                if not os.path.isdir(parent):
                    os.makedirs(parent, 0o755)
            os.chmod(part, 0o444)
            os.replace(part, final)
            os.unlink(rec_path)
            if self.boot is None:
                _fsync_dir(parent)
        except OSError as exc:
            raise self.disk_error(exc, final, spec["path"])
        return final

    def _other_bytes(self, commit, spec, what):
        """The endpoint serves another file than the listing gives (``what`` it did)."""
        err = SnapshotError("E_DOWNLOAD", "%s: the server %s of %s where the listing gives %d; check that %s serves "
                            "revision %s" % (self.repo_id, what, spec["path"], spec["size"], self.endpoint, commit))
        err.other_bytes = True
        return err

    @staticmethod
    def _drop_partial(part, rec_path):
        for path in (part, rec_path):
            if os.path.exists(path):
                os.unlink(path)

    @staticmethod
    def _start_over(progress, counted):
        """The file starts over from its first byte: take its counted bytes back (and add to the
        total what an earlier run had fetched of it), so the progress never passes its total."""
        progress.take_back(counted["done"], counted["first"])
        counted["done"], counted["first"] = 0, 0

    def _stream(self, commit, spec, fd, hasher, offset, rec_path, progress, counted=None):
        """One GET (from ``offset`` with Range when resuming) written to ``fd`` and hashed on the way;
        returns the file's size so far and its checksum object. The resume point is recorded every
        half chunk once its bytes are written (a kill loses nothing written; no wait for the disk)."""
        counted = {"done": 0, "first": offset} if counted is None else counted
        self._before_request("%s must be fetched" % spec["path"])
        url, headers = self.file_request(commit, spec)
        headers["Accept-Encoding"] = "identity"
        if offset:
            headers["Range"] = "bytes=%d-" % offset
        with self._lock:
            self.hub_requests += 1
        writer = PieceHasher(hasher)
        position = committed = offset
        try:
            resp = None
            if plain_http(url, self.use_proxy):
                try:
                    resp = PlainResponse(url, headers, 60, self.use_proxy)
                    blocks, close = resp.pieces, resp.close
                except NotPlain:
                    resp = None  # the session starts over from the first URL and follows the redirect
            if resp is None:
                stream = self.hub()[1].get_session().stream("GET", url, headers=headers, timeout=60)
                resp = stream.__enter__()

                def blocks(room, resp=resp):
                    return session_pieces(resp, room())

                def close(stream=stream):
                    stream.__exit__(None, None, None)
            try:
                status = resp.status_code
                if status == 416 and offset == spec["size"]:
                    return offset, writer.close()
                served = served_size(status, resp.headers)
                if (status == 416 and offset < spec["size"]) or served not in (None, spec["size"]):
                    # The endpoint's file is not the listing's: resuming or asking again gets the same.
                    raise self._other_bytes(commit, spec, "has %s bytes" % served if served is not None
                                            else "refuses a resume at byte %d" % offset)
                if status not in (200, 206):  # an error, or no file: a 3xx with no Location, a 204, a 304
                    raise self._http_error(status, resp.headers, spec["path"], getattr(resp, "url", None))
                start = range_start(resp.headers) if status == 206 else None
                if start not in (None, 0, offset):
                    err = SnapshotError("E_DOWNLOAD", "%s: the server answered a request for %s from byte %d with "
                                        "bytes from %d; rerun to resume" % (self.repo_id, spec["path"], offset, start))
                    err.transient = True
                    raise err
                if offset and (status == 200 or start == 0):
                    # The server ignored the Range, or answered it from the first byte: start this file
                    # over from there.
                    writer.close()
                    self._start_over(progress, counted)
                    try:
                        os.ftruncate(fd, 0)
                        os.lseek(fd, 0, os.SEEK_SET)
                    except OSError as exc:
                        raise self.disk_error(exc, self.partial_dir, spec["path"])
                    writer = PieceHasher(hf_plan.new_hasher(spec))
                    position = committed = 0
                half_chunk = max(1, self.chunk_size // 2)
                for piece, release in blocks(lambda: half_chunk - position % half_chunk):
                    try:
                        count = write_all(fd, piece)
                    except OSError as exc:
                        # Not the network's fault: no retry; what was committed stays for the rerun.
                        raise self.disk_error(exc, self.partial_dir, spec["path"])
                    position += count
                    writer.update(piece, release)
                    counted["done"] += count
                    progress.add(count, spec["path"])
                    if position // half_chunk > committed // half_chunk:  # reached or passed a resume point
                        try:
                            self._commit_record(rec_path, spec, position)
                        except OSError as exc:
                            raise self.disk_error(exc, self.partial_dir, spec["path"])
                        committed = position
                    if position > spec["size"]:
                        break
                if position < spec["size"]:
                    # The body ended with no error (delimited by the connection's close, or a shorter
                    # range than asked): a cut connection, resumed from here.
                    raise ConnectionError("the body ended at byte %d of %d" % (position, spec["size"]))
            finally:
                close()
        except SnapshotError:
            writer.close()
            raise
        except Exception as exc:  # pylint: disable=broad-except  # transport errors: record, then retry/resume
            writer.close()
            try:
                self._commit_record(rec_path, spec, position)
            except OSError as disk:
                raise self.disk_error(disk, self.partial_dir, spec["path"])
            raise self._classify(exc, spec["path"])
        return position, writer.close()

    # --- the run --------------------------------------------------------------------------------
    def run(self):
        try:
            return self._run()
        except OSError as exc:  # a state or file write the steps did not name themselves
            raise self.disk_error(exc, getattr(exc, "filename", None))

    def _run(self):
        if not self.check_mode and not os.path.isdir(self.state_dir):
            os.makedirs(self.state_dir, 0o700)
        commit = self.resolve_commit()
        self.in_run = True
        entries = self.listing(commit)
        files = hf_plan.plan_files(entries, self.allow_patterns)
        for spec in files:
            hf_plan.safe_relpath(spec["path"])
        if not files:
            raise SnapshotError("E_SETTINGS", "%s at %s has no file matching %s" % (
                self.repo_id, commit, self.allow_patterns))
        records_path = os.path.join(self.state_dir, "verified.json")
        records = self._settle(load_json(records_path, {}))
        unsynced = {}
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
                    self._remember(records, unsynced, commit, spec, final)
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
            if hf_plan.offline_mode(os.environ):
                raise SnapshotError("E_SETTINGS", self._offline_text("%d files (%s) must be downloaded, %s first" % (
                    len(todo), hf_plan.human_bytes(needed), todo[0]["path"])))
            lack = hf_plan.free_space_problem(needed, free_bytes(self.local_dir))
            if lack:
                raise SnapshotError("E_DISK", "%s into %s %s" % (self.repo_id, self.local_dir, lack))
        # State is written only now, after the space check: a full disk fails above, with its code.
        if self.pending_listing:
            _write_json(*self.pending_listing)
            self.pending_listing = None
        self._save_settled(records)
        for path in (self.local_dir, self.partial_dir):
            if not os.path.isdir(path):
                os.makedirs(path, 0o755)
        progress = Progress(self.progress_file, needed)
        progress.add(0, force=True)
        if todo and not plain_http(self.endpoint, self.use_proxy):
            self.hub()  # imported once, before the workers start (files only recorded need none)
        for spec in todo:
            final = os.path.join(self.local_dir, spec["path"])
            if os.path.lexists(final):
                os.unlink(final)
        with futures.ThreadPoolExecutor(max_workers=PARALLEL_FILES) as pool:
            pending = [pool.submit(self._fetch, commit, spec, progress) for spec in todo]
            try:
                for spec, done in zip(todo, pending):
                    final = done.result()
                    self._remember(records, unsynced, commit, spec, final)
                    self.verified_now.append(spec["path"])
                    if unsynced:
                        self._save_unsynced(unsynced)
                    else:
                        _write_json(records_path, records)
            except BaseException:
                for waiting in pending:
                    waiting.cancel()  # files not started yet stay for the rerun
                raise
        if self.verified_now:
            self._save_unsynced(unsynced)
            if not unsynced:
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
