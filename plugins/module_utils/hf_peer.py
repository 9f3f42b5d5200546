# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Serve verified snapshots read-only to peer hosts, speaking the part of the Hub's API that
hf_snapshot uses (tree listing, resolve with Range), so a peer copies with the very code, resume
and checksums it uses against the Hub. Only files of a recorded listing whose verification still
holds are served; nothing is written.

It can also serve single files by name under ``/files/NAME`` (the engine image's archive, moved
from its build host to the other hosts): ``load_image`` is their client, which streams the archive
into the host's Docker Engine as it arrives, and ``fetch_file`` the one that keeps a file; both
check the size and sha256 they were given while the bytes arrive.

Every request must carry the run's secret (``Authorization: Bearer SECRET``, what hf_snapshot
sends as its token): anyone else gets 401 and not a byte. The server stops when the stop file
appears, after ``idle_timeout`` seconds without a request or a byte sent (the run that needed it
was killed), or after ``lifetime`` seconds.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import hmac
import json
import os
import re
import threading
import time

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import unquote, urlsplit
except ImportError:  # pragma: no cover  (Python 2 is not supported on hosts)
    BaseHTTPRequestHandler = object
    ThreadingHTTPServer = None

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_records, hf_transfer, image_load, net

RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
SEND_PIECE = 64 * 1024 * 1024


def load_verified_repo(repo):
    """The servable files of one repository: only those whose verification record still holds."""
    with open(os.path.join(repo["state_dir"], "listing-%s.json" % repo["revision"])) as handle:
        listing = json.load(handle)
    records = hf_records.load_records(repo["state_dir"])
    if records is None:
        raise ValueError("%s has no verification records; the seed must finish its own download first"
                         % repo["state_dir"])
    files = {}
    for spec in hf_plan.plan_files(listing["entries"]):
        full = os.path.join(repo["local_dir"], hf_plan.safe_relpath(spec["path"]))
        st = os.stat(full)
        if not hf_plan.is_verified(records, repo["revision"], spec, st.st_size, st.st_mtime_ns):
            raise ValueError("%s is not verified; the seed must finish its own download first" % full)
        files[spec["path"]] = full
    return {"entries": listing["entries"], "files": files, "revision": repo["revision"]}


def authorized(header, secret):
    """True when an Authorization header carries the run's secret as a Bearer token."""
    if not secret or not header:
        return False
    scheme, dummy, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode("utf-8"), secret.encode("utf-8"))


def should_stop(now, began, last_activity, lifetime, idle_timeout, stop_file_exists):
    """Why the server stops now (``stop file``, ``idle``, ``lifetime``), or None to go on."""
    if stop_file_exists:
        return "stop file"
    if idle_timeout and now - last_activity > idle_timeout:
        return "idle"
    if lifetime and now - began > lifetime:
        return "lifetime"
    return None


def read_secret(path):
    """The run's secret from its root-only file (first line); refuse a file others can read."""
    st = os.stat(path)
    if st.st_mode & 0o077:
        raise ValueError("%s must be readable by its owner only (mode 0600)" % path)
    with open(path) as handle:
        secret = handle.readline().strip()
    if len(secret) < 16:
        raise ValueError("the secret in %s is shorter than 16 characters" % path)
    return secret


def servable_files(files):
    """NAME -> path for the single files to serve; each must exist and be a regular file."""
    served = {}
    for item in files or []:
        name, path = item["name"], item["path"]
        if not re.match(r"^[A-Za-z0-9._-]+$", name) or name.startswith("."):
            raise ValueError("%r is not a plain file name" % name)
        if not os.path.isfile(path):
            raise ValueError("%s is not a file" % path)
        served[name] = path
    return served


class PeerHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    repos = {}
    files = {}
    secret = ""
    stats = {"requests": 0, "bytes": 0, "refused": 0}
    activity = [0.0]

    def log_message(self, fmt, *args):
        return

    def _reply(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _missing(self, code, head):
        self._reply(404, b'{"error": "not served"}', {"X-Error-Code": code, "Content-Type": "application/json"}, head)

    def do_HEAD(self):
        self._route(True)

    def do_GET(self):
        self._route(False)

    def _route(self, head):
        self.stats["requests"] += 1
        if not authorized(self.headers.get("Authorization"), self.secret):
            self.stats["refused"] += 1
            return self._reply(401, b'{"error": "this run\'s secret is required"}',
                               {"X-Error-Code": "Unauthorized", "Content-Type": "application/json",
                                "WWW-Authenticate": "Bearer"}, head)
        self.activity[0] = time.time()
        path = unquote(urlsplit(self.path).path)
        if path.startswith("/files/"):
            full = self.files.get(path[len("/files/"):])
            if full is None:
                return self._missing("EntryNotFound", head)
            return self._file(full, "", head)
        match = re.match(r"^/api/models/([^/]+/[^/]+)/(tree|revision)/([0-9a-f]{40})", path)
        if match:
            repo = self.repos.get(match.group(1))
            if repo is None:
                return self._missing("RepoNotFound", head)
            if repo["revision"] != match.group(3):
                return self._missing("RevisionNotFound", head)
            data = repo["entries"] if match.group(2) == "tree" else {"id": match.group(1), "sha": repo["revision"]}
            return self._reply(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, head)
        match = re.match(r"^/([^/]+/[^/]+)/resolve/([0-9a-f]{40})/(.+)$", path)
        repo = match and self.repos.get(match.group(1))
        if not repo:
            return self._missing("RepoNotFound", head)
        if repo["revision"] != match.group(2):
            return self._missing("RevisionNotFound", head)
        full = repo["files"].get(match.group(3))
        if full is None:
            return self._missing("EntryNotFound", head)
        return self._file(full, repo["revision"], head)

    def _file(self, full, revision, head):
        size = os.path.getsize(full)
        start, status = 0, 200
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if revision:
            headers["X-Repo-Commit"] = revision
        wanted = RANGE.match(self.headers.get("Range", "").strip())
        end = size - 1
        if wanted:
            start = int(wanted.group(1))
            end = min(int(wanted.group(2)), size - 1) if wanted.group(2) else size - 1
            if start >= size or start > end:
                return self._reply(416, b"", {"Content-Range": "bytes */%d" % size}, head)
            status = 206
            headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        headers["Content-Length"] = str(end - start + 1)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if head:
            return None
        left = end - start + 1
        with open(full, "rb") as handle:
            # The kernel copies the file to the socket (sendfile): no read into Python and write
            # back out, so the server costs next to no CPU beside the peer's own receiving and
            # hashing. In pieces, so the idle clock sees a long transfer as activity.
            while left > 0:
                piece = min(SEND_PIECE, left)
                # Counted before the kernel sends it (the peer may read the counters as soon as its
                # last byte arrives), corrected should less go out.
                self.stats["bytes"] += piece
                sent = self.connection.sendfile(handle, start, piece)
                self.stats["bytes"] -= piece - sent
                self.activity[0] = time.time()
                if not sent:
                    break
                start += sent
                left -= sent
        return None


def serve(repos, bind, port, stop_file, lifetime, secret, idle_timeout=0, ready=None, files=None):
    """Serve ``repos`` (verified snapshots) and ``files`` (``name`` and ``path`` each) until the stop
    file exists, ``idle_timeout`` passes with no request or byte sent, or ``lifetime`` seconds pass;
    return the counters and why it stopped."""
    if not secret:
        raise ValueError("no secret: the peer server never serves without one")
    PeerHandler.repos = dict((repo["repo_id"], load_verified_repo(repo)) for repo in repos)
    PeerHandler.files = servable_files(files)
    if not PeerHandler.repos and not PeerHandler.files:
        raise ValueError("nothing to serve: give repos or files")
    PeerHandler.secret = secret
    PeerHandler.stats = {"requests": 0, "bytes": 0, "refused": 0}
    began = time.time()
    PeerHandler.activity = [began]
    server = ThreadingHTTPServer((bind, port), PeerHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever)
    thread.daemon = True
    thread.start()
    if ready is not None:
        ready.set()
    try:
        while True:
            why = should_stop(time.time(), began, PeerHandler.activity[0], lifetime, idle_timeout,
                              os.path.exists(stop_file))
            if why:
                break
            time.sleep(0.5)
    finally:
        server.shutdown()
        server.server_close()
    return dict(PeerHandler.stats, seconds=round(time.time() - began, 1), stopped=why)


# --- The client of a served file ---------------------------------------------------------------
# What to check when a served file cannot be fetched (the modules' messages end with it).
REACH_TODO = ("Check that this host reaches the serving host at that address and port (a firewall between hosts, "
              "or a name that resolves to loopback on the serving host?)")

# The options of the modules that copy a served file (doc fragment glm53.tensorfold.peer_copy).
PEER_COPY_SPEC = dict(
    url=dict(type="str", required=True),
    size=dict(type="int", required=True),
    sha256=dict(type="str", required=True),
    secret=dict(type="str", required=True, no_log=True),
    timeout=dict(type="int", default=60),
    wait=dict(type="int", default=60),
    attempts=dict(type="int", default=3),
    host_label=dict(type="str"),
)


def peer_copy_problems(params):
    """What is wrong with the PEER_COPY_SPEC options (a list of sentences, empty when nothing is)."""
    wrong = []
    if not params["url"].startswith("http://"):
        wrong.append("url must be plain http://ADDRESS:PORT/files/NAME")
    if not re.match(r"^[0-9a-f]{64}$", params["sha256"]):
        wrong.append("sha256 must be 64 lowercase hex digits")
    if params["size"] < 0 or params["attempts"] < 1 or params["timeout"] < 1 or params["wait"] < 0:
        wrong.append("size and wait must be 0 or more, attempts and timeout 1 or more")
    if len(params["secret"]) < 16:
        wrong.append("the secret must have at least 16 characters")
    return wrong


class FetchError(Exception):
    """A served file could not be fetched whole and intact; ``what`` is the operator's sentence."""

    def __init__(self, what):
        super(FetchError, self).__init__(what)
        self.what = what


def file_matches(path, size, sha256):
    """True when ``path`` already holds ``size`` bytes with this sha256 (the copy is already there)."""
    try:
        if os.path.getsize(path) != size:
            return False
    except OSError:
        return False
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(hf_transfer.READ_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest() == sha256


def _receive(resp, write, size):
    """Hand the body to ``write`` piece by piece, hashing each piece on its own thread as it
    arrives; return the byte count and the sha256. Stops reading once past ``size`` (the wrong file)."""
    hasher = hf_transfer.PieceHasher(hashlib.sha256())
    got = 0
    try:
        for piece, release in resp.pieces():
            got += write(piece)
            hasher.update(piece, release)
            if got > size:
                break
    except BaseException:
        try:
            hasher.close()
        except Exception:  # pylint: disable=broad-except  # the transfer's own error is the one to report
            pass
        raise
    return got, hasher.close().hexdigest()


class _PartFile:
    """Where one attempt of fetch_file writes: ``dest.part``, removed when the attempt is dropped."""

    def __init__(self, part):
        self.part = part
        self.fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

    def write(self, piece):
        return hf_transfer.write_all(self.fd, piece)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def abort(self):
        self.close()
        try:
            os.unlink(self.part)
        except OSError:
            pass


def _fetch_verified(url, size, sha256, secret, open_sink, timeout, wait, attempts, clock, sleep):
    """Fetch the file a peer serves at ``url`` into a sink (``open_sink()`` makes one per attempt:
    ``write(piece)`` returns the bytes taken, ``abort()`` drops them) until an attempt gives
    ``size`` bytes with ``sha256``: the run's secret as a Bearer token, the bytes hashed while they
    arrive, a server not up yet waited for up to ``wait`` seconds, ``attempts`` fetches in all.
    Returns that attempt's sink, still open, and what happened; raises FetchError with the reason
    (every sink dropped). An error of the sink itself other than OSError is raised as it is."""
    headers = {"Authorization": "Bearer %s" % secret, "Accept-Encoding": "identity"}
    began = clock()
    if wait > 0:  # the server starts in the same run: it may not listen yet
        net.wait_for_listener(url, wait, clock=clock, sleep=sleep)
    tried, last = 0, ""
    while True:
        try:
            resp = hf_transfer.PlainResponse(url, headers, timeout)
        except (OSError, hf_transfer.http_client.HTTPException) as exc:
            raise FetchError("cannot reach %s: %s" % (url, exc))
        except hf_transfer.SnapshotError as err:
            raise FetchError(err.what)
        tried += 1
        got = sink = None
        try:
            if resp.status_code == 401:
                raise FetchError("%s refused this run's secret (HTTP 401)" % url)
            if resp.status_code != 200:
                raise FetchError("%s answered HTTP %d" % (url, resp.status_code))
            sink = open_sink()
            try:
                got, digest = _receive(resp, sink.write, size)
            except (OSError, hf_transfer.http_client.HTTPException) as exc:
                last = "the transfer from %s broke off: %s" % (url, exc)
        except BaseException:
            if sink is not None:
                sink.abort()
            raise
        finally:
            resp.close()
        if got is not None:
            if got == size and digest == sha256:
                return sink, {"bytes": got, "attempts": tried, "seconds": round(clock() - began, 2)}
            last = "%s sent %d bytes with sha256 %s; expected %d bytes with sha256 %s" % (url, got, digest, size, sha256)
        sink.abort()
        if tried >= attempts:
            raise FetchError("%s (%d attempts)" % (last, tried))


def fetch_file(url, dest, size, sha256, secret, timeout=60, wait=60, attempts=3, mode=0o644,
               clock=time.time, sleep=time.sleep):
    """Copy the file a peer serves at ``url`` to ``dest`` (_fetch_verified), moved into place whole
    once its size and sha256 match. Returns what happened; raises FetchError with the reason."""
    if file_matches(dest, size, sha256):
        return {"changed": False, "bytes": 0, "attempts": 0, "seconds": 0.0}
    parent = os.path.dirname(dest) or "."
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    part = dest + ".part"
    sink, result = _fetch_verified(url, size, sha256, secret, lambda: _PartFile(part), timeout, wait, attempts,
                                   clock, sleep)
    sink.close()
    os.chmod(part, mode)
    os.replace(part, dest)
    return dict(result, changed=True)


def load_image(url, size, sha256, secret, docker_socket, ref, identity, timeout=60, wait=60, attempts=3,
               load_timeout=1800, clock=time.time, sleep=time.sleep):
    """Load the image archive a peer serves at ``url`` straight into the Docker Engine at
    ``docker_socket`` (image_load.DockerLoad), the archive never written to disk: the body is
    ended, and so loaded, only once its size and sha256 match (_fetch_verified); a wrong or broken
    transfer is dropped and fetched again. Then ``ref`` must name an image of ``identity``
    (image_load.identity: the build host's, whichever image store either Docker uses). A host
    where ``ref`` already names one is left alone. Returns what happened; raises FetchError (the
    transfer) or image_load.LoadError (the engine, or the loaded image is another)."""
    have_id, have = image_load.named_image(docker_socket, ref, timeout)
    if have == identity:
        return {"changed": False, "bytes": 0, "attempts": 0, "seconds": 0.0, "image_id": have_id, "identity": identity}
    sink, result = _fetch_verified(url, size, sha256, secret, lambda: image_load.DockerLoad(docker_socket, load_timeout),
                                   timeout, wait, attempts, clock, sleep)
    names = sink.commit()
    now_id, now = image_load.named_image(docker_socket, ref, timeout)
    if now != identity:
        raise image_load.LoadError("after the load, %s names %s, not the image the archive was made from (identity %s, "
                                   "its layers and run settings; found %s); the load named %s"
                                   % (ref, now_id or "no image", identity[7:19], now[7:19] if now else "none",
                                      ", ".join(names) or "nothing"))
    return dict(result, changed=True, image_id=now_id, identity=identity, loaded=names)
