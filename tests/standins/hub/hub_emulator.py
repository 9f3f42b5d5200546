#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Stand-in for the Hugging Face Hub's HTTP API, as huggingface_hub 2.x uses it to download.

What it stands for: https://huggingface.co (and its LFS CDN) for model repositories. It serves
repositories from a folder (``ROOT/owner/name/`` files plus ``ROOT/owner/name.repo.json`` with the
commit, optional branches and ``gated``) and reproduces the recorded behaviour the client relies on:

- ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}``: model info with ``sha``
  (the resolved commit), ``siblings``, ``gated``, ``private``.
- ``GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=&expand=``: a JSON list of
  ``{"type","oid","size","path"}`` entries, ``"lfs": {"oid": sha256, "size", "pointerSize"}``
  for LFS files, folders as ``{"type": "directory"}`` when not recursive; one page (no Link).
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: small files answered directly with ``ETag`` (the git
  blob id, quoted), ``X-Repo-Commit``, ``Content-Length``; LFS files answered ``302`` to a CDN
  path with ``X-Linked-Etag`` (the sha256, quoted), ``X-Linked-Size``, ``X-Repo-Commit``, ``ETag``.
- The CDN path and small files honour ``Range: bytes=A-`` / ``A-B`` with ``206`` and
  ``Content-Range``, and ``416`` with ``Content-Range: bytes */SIZE`` past the end.
- Errors as the Hub sends them: ``X-Error-Code`` / ``X-Error-Message`` headers and a JSON
  ``{"error": ...}`` body. Unknown repository: 401 ``RepoNotFound`` without a token, 404 with one.
  Unknown revision: 404 ``RevisionNotFound``. Unknown file: 404 ``EntryNotFound``. A token the Hub
  does not know: 401 "Invalid credentials in Authorization header". A gated file without a token:
  401 ``GatedRepo``; with a valid token whose account has not accepted the terms: 403 ``GatedRepo``.
  Gated repositories' info and tree stay public, as on the Hub.

Fault switches (``--faults JSON`` at start, or ``POST /_emulator/faults`` with a JSON body) to
test clients: ``cut`` {glob: bytes} closes the connection after that many bytes of a file (once
per file unless ``cut_always``), ``throttle_bps`` limits every body, ``corrupt`` [glob] flips one
byte of the served content, ``status`` {glob: 401|403|429|5xx} answers that status for a file (every
time, or only its first ``status_times`` requests; with ``retry_after`` the reply carries that
``Retry-After`` value), ``cdn_status`` {glob: 400|401|403|404|5xx} answers that status at the CDN
(after the Hub's 302) as S3/CloudFront do: an XML body (``AccessDenied``/``Request has expired`` for
403, ``NoSuchKey`` for 404) and none of the Hub's ``X-Error-*`` headers; every time, or only the
first ``cdn_status_times`` CDN requests of a file.
Every request is logged (method, path, Range, status, body bytes sent, whether a token came; never
the token) to ``--log`` as JSON lines and at ``GET /_emulator/log``, which first waits (10 s at
most) for answers still being sent; ``POST /_emulator/reset`` clears the log and the faults, after
the same wait.

Run: ``python3 hub_emulator.py --root DIR --port 8080 --tokens accepted:TOK1,denied:TOK2``.
"""

import argparse
import fnmatch
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
LFS_MIN_SIZE = 10 * 1024 * 1024


class Repo:
    """One repository: files on disk, their git oids and sha256, the commit and gating."""

    def __init__(self, root, repo_id):
        self.repo_id = repo_id
        self.folder = os.path.join(root, repo_id)
        with open(os.path.join(root, repo_id + ".repo.json")) as handle:
            meta = json.load(handle)
        self.commit = meta["commit"]
        self.branches = dict(meta.get("branches", {"main": self.commit}))
        self.gated = meta.get("gated", False)
        self.files = {}
        for base, dummy, names in os.walk(self.folder):
            for name in names:
                full = os.path.join(base, name)
                rel = os.path.relpath(full, self.folder).replace(os.sep, "/")
                self.files[rel] = self._describe(full)

    @staticmethod
    def _describe(full):
        size = os.path.getsize(full)
        sha1 = hashlib.sha1(b"blob %d\0" % size)
        sha256 = hashlib.sha256()
        with open(full, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha1.update(block)
                sha256.update(block)
        lfs = full.endswith(LFS_SUFFIXES) or size >= LFS_MIN_SIZE
        entry = {"full": full, "size": size, "sha256": sha256.hexdigest(), "lfs": lfs}
        if lfs:
            # The git blob of an LFS file is its pointer file.
            pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                       % (entry["sha256"], size)).encode()
            entry["pointer_size"] = len(pointer)
            entry["oid"] = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
        else:
            entry["oid"] = sha1.hexdigest()
        return entry

    def resolve(self, rev):
        if rev == self.commit:
            return self.commit
        return self.branches.get(rev)

    def tree(self, path, recursive):
        prefix = (path.strip("/") + "/") if path else ""
        out, folders = [], set()
        for rel in sorted(self.files):
            if not rel.startswith(prefix):
                continue
            rest = rel[len(prefix):]
            if not recursive and "/" in rest:
                folders.add(prefix + rest.split("/")[0])
                continue
            if recursive:
                parts = rest.split("/")[:-1]
                for i in range(len(parts)):
                    folders.add(prefix + "/".join(parts[:i + 1]))
            item = self.files[rel]
            entry = {"type": "file", "oid": item["oid"], "size": item["pointer_size"] if item["lfs"] else item["size"],
                     "path": rel}
            if item["lfs"]:
                entry["size"] = item["size"]
                entry["lfs"] = {"oid": item["sha256"], "size": item["size"], "pointerSize": item["pointer_size"]}
            out.append(entry)
        for folder in sorted(folders):
            out.append({"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "size": 0,
                        "path": folder})
        return out


class State:
    def __init__(self, root, tokens, log_path, faults):
        self.root = root
        self.tokens = tokens
        self.log_path = log_path
        self.lock = threading.Lock()
        self.log = []
        # Hub requests whose answer is still being sent (and so not yet logged): a log read waits
        # for them, or a client that got its last bytes could read a log without that request.
        self.in_flight = 0
        self.idle = threading.Condition(self.lock)
        self.faults = faults
        self.cut_done = set()
        self.status_seen = {}
        self.repos = {}
        self.cdn_port = 0
        self.load()

    def load(self):
        repos = {}
        for base, dummy, names in os.walk(self.root):
            for name in names:
                if name.endswith(".repo.json"):
                    rel = os.path.relpath(os.path.join(base, name[:-len(".repo.json")]), self.root)
                    repos[rel.replace(os.sep, "/")] = Repo(self.root, rel.replace(os.sep, "/"))
        self.repos = repos

    def begin(self):
        with self.lock:
            self.in_flight += 1

    def end(self):
        with self.lock:
            self.in_flight -= 1
            self.idle.notify_all()

    def settle(self, deadline=10.0):
        """Wait (with the lock held on return) until no Hub answer is being sent."""
        self.lock.acquire()
        self.idle.wait_for(lambda: self.in_flight == 0, timeout=deadline)

    def settled_log(self):
        self.settle()
        try:
            return list(self.log)
        finally:
            self.lock.release()

    def record(self, entry):
        with self.lock:
            self.log.append(entry)
            if self.log_path:
                with open(self.log_path, "a") as handle:
                    handle.write(json.dumps(entry, sort_keys=True) + "\n")

    def fault(self, kind, path):
        rules = self.faults.get(kind) or {}
        if isinstance(rules, list):
            return any(fnmatch.fnmatch(path, pat) for pat in rules)
        for pat, value in rules.items():
            if fnmatch.fnmatch(path, pat):
                return value
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "HubEmulator/1"
    state = None  # set by main()

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        return

    # --- helpers --------------------------------------------------------------------------------
    def _auth(self):
        """Return (token_given, account): account is accepted/denied/None (unknown token)."""
        header = self.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return False, None
        return True, self.state.tokens.get(header[len("Bearer "):].strip())

    def _send(self, status, body=b"", headers=None, head=False, note=None):
        self.send_response(status)
        headers = dict(headers or {})
        headers.setdefault("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        # Logged before the answer leaves: a client that reads it and asks again at once (a retry
        # without a pause) must find this request in the log ahead of its next one.
        self._log(status, 0 if head else len(body), note)
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _error(self, status, code, message, head=False, extra=None):
        headers = {"X-Error-Message": message, "Content-Type": "application/json"}
        headers.update(extra or {})
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers, head=head)

    def _json(self, data, head=False):
        self._send(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, head=head)

    def _log(self, status, sent, note=None):
        if urlsplit(self.path).path.startswith("/_emulator/"):
            return  # the test's own control requests are not Hub traffic
        token_given, dummy = self._auth()
        self.state.record({"t": round(time.time(), 3), "method": self.command, "path": urlsplit(self.path).path,
                           "range": self.headers.get("Range"), "status": status, "bytes": sent,
                           "auth": token_given, "note": note})

    # --- routing --------------------------------------------------------------------------------
    def do_HEAD(self):
        self._counted(head=True)

    def do_GET(self):
        self._counted(head=False)

    def _counted(self, head):
        if urlsplit(self.path).path.startswith("/_emulator/"):
            return self._route(head)
        self.state.begin()
        try:
            return self._route(head)
        finally:
            self.state.end()

    def do_POST(self):
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path == "/_emulator/faults":
            self.state.settle()  # a request of the last case, still being answered, keeps its faults
            try:
                self.state.faults = json.loads(body or b"{}")
                self.state.cut_done = set()
                self.state.status_seen = {}
            finally:
                self.state.lock.release()
            return self._json({"faults": self.state.faults})
        if url.path == "/_emulator/reset":
            self.state.settle()  # nor is one of them logged after the reset
            try:
                self.state.log = []
                self.state.faults = {}
                self.state.cut_done = set()
                self.state.status_seen = {}
            finally:
                self.state.lock.release()
            self.state.load()
            return self._send(204)
        return self._error(404, None, "Not Found")

    def _route(self, head):
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        if path == "/_emulator/log":
            return self._json(self.state.settled_log(), head=head)
        token_given, account = self._auth()
        if token_given and account is None:
            return self._error(401, None, "Invalid credentials in Authorization header", head=head)
        match = re.match(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$", path)
        if match:
            return self._model_info(match.group("repo"), match.group("rev"), token_given, head)
        match = re.match(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<sub>.*))?$", path)
        if match:
            recursive = (query.get("recursive", ["false"])[0].lower() in ("true", "1"))
            return self._tree(match.group("repo"), match.group("rev"), match.group("sub"), recursive,
                              token_given, head)
        match = re.match(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$", path)
        if match:
            return self._resolve(match.group("repo"), match.group("rev"), match.group("file"), token_given,
                                 account, head)
        match = re.match(r"^/cdn-lfs/(?P<repo>[^/]+/[^/]+)/(?P<sha>[0-9a-f]{64})$", path)
        if match:
            return self._cdn(match.group("repo"), match.group("sha"), query, head)
        return self._error(404, None, "Not Found", head=head)

    def _repo(self, repo_id, token_given, head):
        repo = self.state.repos.get(repo_id)
        if repo is None:
            # The Hub does not say whether a repository exists to anonymous callers.
            self._error(404 if token_given else 401, "RepoNotFound", "Repository not found", head=head)
        return repo

    def _model_info(self, repo_id, rev, token_given, head):
        repo = self._repo(repo_id, token_given, head)
        if repo is None:
            return None
        commit = repo.resolve(rev or "main")
        if commit is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, head=head)
        return self._json({"_id": hashlib.md5(repo_id.encode()).hexdigest()[:24], "id": repo_id,
                           "modelId": repo_id, "sha": commit, "private": False,
                           "gated": "manual" if repo.gated else False, "disabled": False,
                           "siblings": [{"rfilename": rel} for rel in sorted(repo.files)]}, head=head)

    def _tree(self, repo_id, rev, sub, recursive, token_given, head):
        repo = self._repo(repo_id, token_given, head)
        if repo is None:
            return None
        if repo.resolve(rev) is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, head=head)
        return self._json(repo.tree(sub or "", recursive), head=head)

    def _resolve(self, repo_id, rev, rel, token_given, account, head):
        repo = self._repo(repo_id, token_given, head)
        if repo is None:
            return None
        commit = repo.resolve(rev)
        if commit is None:
            return self._error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, head=head)
        forced = self.state.fault("status", rel)
        times = self.state.faults.get("status_times")
        if forced and times:
            with self.state.lock:
                seen = self.state.status_seen.get(rel, 0)
                self.state.status_seen[rel] = seen + 1
            if seen >= int(times):
                forced = None
        if repo.gated and not token_given or forced == 401:
            return self._error(401, "GatedRepo", "Access to model %s is restricted. You must have access to it and "
                               "be authenticated to access it. Please log in." % repo_id, head=head)
        if repo.gated and account != "accepted" or forced == 403:
            return self._error(403, "GatedRepo", "Access to model %s is restricted and you are not in the "
                               "authorized list. Visit https://huggingface.co/%s to ask for access."
                               % (repo_id, repo_id), head=head)
        if forced:
            retry_after = self.state.faults.get("retry_after")
            return self._error(int(forced), None, "Too Many Requests" if int(forced) == 429 else "Internal Error",
                               head=head, extra={"Retry-After": str(retry_after)} if retry_after is not None else None)
        item = repo.files.get(rel)
        if item is None:
            return self._error(404, "EntryNotFound", "Entry not found", head=head)
        common = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if item["lfs"]:
            # The CDN is another origin (the next port), as cdn-lfs / cas-bridge are for the Hub:
            # the client must not send the token there, and stops its HEAD at this redirect.
            host = (self.headers.get("Host") or self.server.server_address[0]).rsplit(":", 1)[0]
            location = "http://%s:%d/cdn-lfs/%s/%s?filename=%s" % (host, self.state.cdn_port, repo_id, item["sha256"],
                                                                   quote(rel))
            headers = dict(common, Location=location, ETag='"%s"' % item["oid"],
                           **{"X-Linked-Etag": '"%s"' % item["sha256"], "X-Linked-Size": str(item["size"])})
            return self._send(302, b"", headers, head=head)
        return self._body(item, rel, dict(common, ETag='"%s"' % item["oid"]), head)

    def _cdn(self, repo_id, sha, query, head):
        repo = self.state.repos.get(repo_id)
        rel = (query.get("filename") or [""])[0]
        item = repo and repo.files.get(rel)
        if not item or item["sha256"] != sha:
            return self._error(404, None, "Not Found", head=head)
        forced = self.state.fault("cdn_status", rel)
        times = self.state.faults.get("cdn_status_times")
        if forced and times:
            with self.state.lock:
                seen = self.state.status_seen.get(("cdn", rel), 0)
                self.state.status_seen[("cdn", rel)] = seen + 1
            if seen >= int(times):
                forced = None
        if forced:
            code, message = {403: ("AccessDenied", "Request has expired"),
                             404: ("NoSuchKey", "The specified key does not exist.")}.get(
                                 int(forced), ("Error", "Error"))
            body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>'
                    % (code, message)).encode()
            return self._send(int(forced), body, {"Content-Type": "application/xml"}, head=head)
        return self._body(item, rel, {"ETag": '"%s"' % sha}, head)

    def _body(self, item, rel, headers, head):
        size = item["size"]
        start, end, status = 0, size - 1, 200
        wanted = self.headers.get("Range")
        if wanted:
            match = re.match(r"^bytes=(\d*)-(\d*)$", wanted.strip())
            if match and (match.group(1) or match.group(2)):
                if match.group(1):
                    start = int(match.group(1))
                    end = int(match.group(2)) if match.group(2) else size - 1
                else:
                    start = max(size - int(match.group(2)), 0)
                end = min(end, size - 1)
                if start >= size or start > end:
                    return self._send(416, b"", dict(headers, **{"Content-Range": "bytes */%d" % size}), head=head)
                status = 206
                headers["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
        length = end - start + 1
        headers["Content-Length"] = str(length)
        headers["Content-Type"] = "application/octet-stream"
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if head:
            return self._log(status, 0)
        cut = self.state.fault("cut", rel)
        if cut is not None:
            key = (rel, int(cut))
            if key in self.state.cut_done and not self.state.faults.get("cut_always"):
                cut = None
            else:
                self.state.cut_done.add(key)
        corrupt = self.state.fault("corrupt", rel)
        throttle = float(self.state.faults.get("throttle_bps") or 0)
        sent, note = 0, None
        began = time.time()
        try:
            with open(item["full"], "rb") as handle:
                handle.seek(start)
                position = start
                while sent < length:
                    block = handle.read(min(64 * 1024, length - sent))
                    if not block:
                        break
                    if corrupt and position <= size // 2 < position + len(block):
                        index = size // 2 - position
                        block = block[:index] + bytes([block[index] ^ 0xFF]) + block[index + 1:]
                        note = "corrupted"
                    if cut is not None and position + len(block) >= int(cut):
                        block = block[:max(int(cut) - position, 0)]
                        self.wfile.write(block)
                        sent += len(block)
                        note = "cut"
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        break
                    self.wfile.write(block)
                    sent += len(block)
                    position += len(block)
                    if throttle:
                        ahead = sent / throttle - (time.time() - began)
                        if ahead > 0:
                            time.sleep(ahead)
        except (BrokenPipeError, ConnectionResetError, OSError):
            note = note or "client went away"
            self.close_connection = True
        self._log(status, sent, note)
        return None


def parse_tokens(text):
    tokens = {}
    for item in filter(None, (text or "").split(",")):
        account, dummy, token = item.partition(":")
        tokens[token] = account
    return tokens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--tokens", default=os.environ.get("HUB_EMULATOR_TOKENS", ""),
                        help="account:token pairs, account accepted (terms accepted) or denied")
    parser.add_argument("--cdn-port", type=int, default=0, help="the CDN's port (default: port + 1)")
    parser.add_argument("--log", default=None)
    parser.add_argument("--faults", default="{}")
    args = parser.parse_args(argv)
    Handler.state = State(args.root, parse_tokens(args.tokens), args.log, json.loads(args.faults))
    Handler.state.cdn_port = args.cdn_port or args.port + 1
    cdn = ThreadingHTTPServer((args.bind, Handler.state.cdn_port), Handler)
    cdn.daemon_threads = True
    threading.Thread(target=cdn.serve_forever, daemon=True).start()
    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    server.daemon_threads = True
    sys.stdout.write("hub emulator on %s:%d (CDN :%d) serving %s\n" % (
        args.bind, args.port, Handler.state.cdn_port, sorted(Handler.state.repos)))
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
