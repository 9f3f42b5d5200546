# -*- coding: utf-8 -*-
"""The image archive a peer serves, streamed into the Docker Engine as it arrives (hf_peer.load_image,
image_load): the engine gets a finished body only when the size and sha256 match, an unfinished one
otherwise (which it discards); a broken transfer is fetched again; the engine's refusals, its errors
after answering 200 and a loaded image of another identity are failures of their own. The identity
holds across Docker's two image stores, where the id does not.

The engine here is a stand-in on a unix socket, built from the Engine API's contract: POST
/images/load takes the archive as the body (here chunked, RFC 9112) and answers a stream of JSON
objects; GET /images/NAME/json answers the image's inspection, or 404. A body that ends without its
last chunk is never loaded. tests/integration/test_peer_image_load.py runs the same against the real
engine."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer, image_load

# The served archive and its servers, as test_peer_fetch.py makes them.
from ansible_collections.glm53.tensorfold.tests.unit.plugins.module_utils.test_peer_fetch import (
    ARCHIVE, DIGEST, SECRET, BreaksOnce, Served)

REF = "glm53/tensorfold-native:3f2a9c1d"
IMAGE_ID = "sha256:" + "5b" * 32
LAYERS = ["sha256:" + "1a" * 32, "sha256:" + "2b" * 32]
RUNS = {"Entrypoint": ["/opt/tensorfold/bin/tensorfold-runner"], "Env": ["PATH=/usr/local/sbin:/usr/bin"],
        "WorkingDir": "/opt/tensorfold", "Labels": {"org.glm53.tag": "3f2a9c1d"}}
# The image as the graphdriver store inspects it: its id is its configuration's digest.
IMAGE = {"Id": IMAGE_ID, "RepoTags": [REF], "Os": "linux", "Architecture": "amd64",
         "RootFS": {"Type": "layers", "Layers": LAYERS},
         "Config": dict(RUNS, Hostname="", User="", Cmd=None, Volumes=None, OnBuild=None)}
# The same image in the containerd store (Docker Engine 29's default on a fresh install): the id is
# its manifest's digest, and the configuration's empty fields are left out rather than null.
IMAGE_CONTAINERD = {"Id": "sha256:" + "9c" * 32, "RepoTags": [REF], "Os": "linux", "Architecture": "amd64",
                    "Descriptor": {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                   "digest": "sha256:" + "9c" * 32, "size": 1024},
                    "RootFS": {"Type": "layers", "Layers": LAYERS}, "Config": dict(RUNS)}
IDENTITY = image_load.identity(IMAGE)


class UnixHTTPServer(ThreadingHTTPServer):
    address_family = socket.AF_UNIX

    def server_bind(self):
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "engine", 0


class Engine:
    """The Docker Engine stand-in. ``mode``: load (the archive's image, as ``store`` inspects it),
    refuse (500 before reading the body), fail (200, then an error object), other (loads an image
    with another layer). ``have``: the images (inspections) it holds from the start."""

    def __init__(self, tmp_path, mode="load", have=None, store=None):
        self.path = str(tmp_path / "docker.sock")
        self.mode = mode
        self.store = store or IMAGE
        self.images = dict(have or {})
        self.bodies = []     # finished bodies (loaded or failed)
        self.discarded = 0   # bodies that ended without their last chunk
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                return

            def _json(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                name = self.path[len("/images/"):-len("/json")] if self.path.endswith("/json") else ""
                name = name.replace("%2F", "/")
                if name in engine.images:
                    self._json(200, engine.images[name])
                else:
                    self._json(404, {"message": "No such image: %s" % name})

            def _chunks(self):
                parts = []
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return None  # the client hung up inside the body
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(parts)
                    data = self.rfile.read(size)
                    if len(data) < size:
                        return None
                    parts.append(data)
                    self.rfile.readline()

            def do_POST(self):
                assert self.path.startswith("/images/load")
                assert self.headers.get("Transfer-Encoding") == "chunked"
                if engine.mode == "refuse":
                    self.close_connection = True
                    return self._json(500, {"message": "write /var/lib/docker/tmp: no space left on device"})
                body = self._chunks()
                if body is None:
                    engine.discarded += 1
                    self.close_connection = True
                    return None
                engine.bodies.append(body)
                if engine.mode == "fail":
                    lines = [{"errorDetail": {"message": "archive/tar: invalid tar header"}, "error": "archive/tar: invalid tar header"}]
                else:
                    engine.images[REF] = engine.store if engine.mode == "load" else dict(
                        IMAGE, Id="sha256:" + "0f" * 32, RootFS={"Type": "layers", "Layers": LAYERS + ["sha256:" + "3c" * 32]})
                    lines = [{"stream": "Loaded image: %s\n" % REF}]
                out = b"".join(json.dumps(line).encode() + b"\r\n" for line in lines)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(out), out))
                return None

        self.server = UnixHTTPServer(self.path, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever)
        self.thread.start()

    def close(self):
        """Stop, once every connection was handled (the server joins its threads on close): the
        counts are final after it."""
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(10)


@pytest.fixture(name="engine")
def engine_fixture(tmp_path):
    engine = Engine(tmp_path)
    yield engine
    engine.close()


@pytest.fixture(name="served")
def served_fixture(tmp_path):
    served = Served(tmp_path)
    yield served
    served.close()


def load(served_url, engine, sha256=DIGEST, **kwargs):
    return hf_peer.load_image(served_url, len(ARCHIVE), sha256, SECRET, engine.path, REF, IDENTITY, **kwargs)


def test_the_archive_goes_whole_into_the_engine_and_a_second_run_leaves_it(served, engine):
    result = load(served.url, engine)
    assert result["changed"] and result["image_id"] == IMAGE_ID and result["identity"] == IDENTITY and result["loaded"] == [REF]
    assert result["bytes"] == len(ARCHIVE) and result["attempts"] == 1
    assert engine.bodies == [ARCHIVE] and engine.discarded == 0
    again = load(served.url, engine)
    assert not again["changed"] and again["attempts"] == 0
    assert len(engine.bodies) == 1


def test_a_wrong_sha256_is_never_loaded(served, engine):
    with pytest.raises(hf_peer.FetchError, match="expected %d bytes with sha256 0000" % len(ARCHIVE)):
        load(served.url, engine, sha256="0" * 64, attempts=2)
    engine.close()
    assert engine.bodies == [] and engine.discarded == 2 and REF not in engine.images


def test_a_transfer_that_breaks_off_is_dropped_and_fetched_again(tmp_path, engine):
    class BreaksOnceHere(BreaksOnce):
        calls = []

    server = ThreadingHTTPServer(("127.0.0.1", 0), BreaksOnceHere)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        url = "http://127.0.0.1:%d/files/abc123.tar" % server.server_address[1]
        result = load(url, engine)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    engine.close()
    assert result["attempts"] == 2 and engine.bodies == [ARCHIVE] and engine.discarded == 1


@pytest.mark.parametrize("mode, said", [
    ("refuse", "the Docker Engine answered HTTP 500: write /var/lib/docker/tmp: no space left on device"),
    ("fail", "the Docker Engine could not load the image: archive/tar: invalid tar header"),
    ("other", "after the load, %s names sha256:0f0f" % REF),
])
def test_what_the_engine_says_against_the_load_is_a_load_error(tmp_path, served, mode, said):
    engine = Engine(tmp_path, mode=mode)
    try:
        with pytest.raises(image_load.LoadError) as raised:
            load(served.url, engine)
    finally:
        engine.close()
    assert raised.value.what.startswith(said)


def test_another_image_under_the_tag_is_replaced(served, tmp_path):
    engine = Engine(tmp_path, have={REF: dict(IMAGE, Id="sha256:" + "aa" * 32, Config=dict(RUNS, Env=["DEBUG=1"]))})
    try:
        result = load(served.url, engine)
    finally:
        engine.close()
    assert result["changed"] and engine.images[REF] == IMAGE


def test_a_host_whose_docker_uses_the_containerd_store_takes_the_image_by_its_identity(served, tmp_path):
    # Loaded there, the build host's image has another id: it is the same image all the same.
    engine = Engine(tmp_path, store=IMAGE_CONTAINERD)
    try:
        result = load(served.url, engine)
        again = load(served.url, engine)
    finally:
        engine.close()
    assert result["changed"] and result["image_id"] == IMAGE_CONTAINERD["Id"] and result["identity"] == IDENTITY
    assert not again["changed"] and len(engine.bodies) == 1


def test_the_identity_is_the_layers_the_platform_and_how_the_image_runs():
    assert image_load.identity(IMAGE) == image_load.identity(IMAGE_CONTAINERD) == IDENTITY
    assert IDENTITY.startswith("sha256:") and len(IDENTITY) == 71
    # An empty setting is absent, whichever way a store writes it.
    assert image_load.identity(dict(IMAGE, Config=dict(RUNS, Cmd=[], Volumes={}, User=""))) == IDENTITY
    changed = [dict(IMAGE, RootFS={"Type": "layers", "Layers": LAYERS[:1]}),
               dict(IMAGE, RootFS={"Type": "layers", "Layers": list(reversed(LAYERS))}),
               dict(IMAGE, Architecture="arm64"), dict(IMAGE, Variant="v8"),
               dict(IMAGE, Config=dict(RUNS, Entrypoint=["/bin/sh"])), dict(IMAGE, Config=dict(RUNS, Cmd=["--serve"])),
               dict(IMAGE, Config=dict(RUNS, Env=RUNS["Env"] + ["X=1"])), dict(IMAGE, Config=dict(RUNS, User="1000")),
               dict(IMAGE, Config=dict(RUNS, WorkingDir="/")), dict(IMAGE, Config=dict(RUNS, Labels={}))]
    assert len(set(image_load.identity(one) for one in changed) | {IDENTITY}) == len(changed) + 1
    # What the build records about itself is not how the image runs.
    assert image_load.identity(dict(IMAGE, Created="2026-12-05T10:00:00Z", Comment="buildkit.dockerfile.v0")) == IDENTITY


def test_an_engine_that_is_not_there_is_an_os_error(served, tmp_path):
    with pytest.raises(OSError):
        hf_peer.load_image(served.url, len(ARCHIVE), DIGEST, SECRET, str(tmp_path / "none.sock"), REF, IDENTITY)


def test_the_load_answer_names_what_was_loaded_or_the_error():
    body = b'{"stream":"Loaded image: a/b:1\\n"}\r\n{"stream":"Loaded image ID: sha256:abc\\n"}\r\nnot json\r\n[1]\r\n'
    assert image_load.loaded(body) == (["a/b:1", "sha256:abc"], None)
    assert image_load.loaded(b'{"errorDetail":{"message":"bad"}}\n') == ([], "bad")
    assert image_load.loaded(b'{"error":"worse","errorDetail":{"message":"bad"}}\n') == ([], "worse")
    assert image_load.refusal(500, b'{"message":"no space"}') == "the Docker Engine answered HTTP 500: no space"
    assert image_load.refusal(502, b"<html>bad gateway</html>") == "the Docker Engine answered HTTP 502: <html>bad gateway</html>"


def test_only_a_unix_docker_host_is_spoken():
    assert image_load.socket_path("unix:///run/docker.sock") == "/run/docker.sock"
    with pytest.raises(ValueError):
        image_load.socket_path("tcp://10.0.0.1:2375")


def test_the_archives_last_bytes_reach_the_engine_only_when_the_load_is_ended(tmp_path):
    """A daemon that stops reading at the tar's end marker must not get it before the sha256 is known."""
    path = str(tmp_path / "raw.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    data = bytes(range(256)) * 1024 + b"\0" * 1024  # 256 KiB of content, then a tar's end marker
    seen = []

    def read(conn):
        conn.settimeout(10)
        while True:
            got = conn.recv(1 << 20)
            if not got:
                return
            seen.append(got)

    try:
        load = image_load.DockerLoad(path, 10)
        conn = listener.accept()[0]
        reader = threading.Thread(target=read, args=(conn,))
        reader.start()
        for at in range(0, len(data), 100 * 1000):
            load.write(memoryview(data)[at:at + 100 * 1000])
        load.abort()
        reader.join(10)
        conn.close()
    finally:
        listener.close()
    body, sent = b"".join(seen).split(b"\r\n\r\n", 1)[1], b""
    while body:  # dechunk: what the engine got before the connection closed
        size, body = body.split(b"\r\n", 1)
        assert int(size, 16) > 0, "the body was ended"
        sent, body = sent + body[:int(size, 16)], body[int(size, 16) + 2:]
    assert sent == data[:len(data) - image_load.HOLD]
