# -*- coding: utf-8 -*-
"""peer_image_load's way against this machine's real Docker Engine: an archive another host serves
(hf_peer's server here) goes into the engine as it arrives, and the image it names has the id the
archive was saved from; an archive whose bytes are not the ones expected reaches the engine as an
unfinished body, and the engine loads nothing of it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer, image_load  # noqa: E402

SOCKET = "/var/run/docker.sock"
SECRET = "s3cretForThisRunOnly0123456789"


@contextlib.contextmanager
def serving(tmp_path, archive):
    """hf_peer's server of the one archive on loopback: (its URL, the run's secret)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    stop, ready = tmp_path / "stop", threading.Event()
    thread = threading.Thread(target=hf_peer.serve, args=([], "127.0.0.1", port, str(stop), 120, SECRET),
                              kwargs={"idle_timeout": 60, "ready": ready,
                                      "files": [{"name": "image.tar", "path": str(archive)}]})
    thread.start()
    try:
        assert ready.wait(20), "the server did not start"
        yield "http://127.0.0.1:%d/files/image.tar" % port, SECRET
    finally:
        stop.write_text("")
        thread.join(30)


def docker(*args, **kwargs):
    return subprocess.run(["docker"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=kwargs.get("text", True), timeout=120, check=kwargs.get("check", True))


@pytest.fixture(name="saved")
def saved_fixture(tmp_path):
    """A small image (one file, made with docker import), saved to an archive and then removed from
    the engine: (reference, id, identity, archive path)."""
    if not os.path.exists(SOCKET) or docker("info", check=False).returncode != 0:
        pytest.fail("needs a running Docker engine (scripts/bootstrap.sh)")
    ref = "glm53-test/peer-load:%s" % uuid.uuid4().hex[:12]
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        data = os.urandom(512 * 1024)
        info = tarfile.TarInfo("engine.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    subprocess.run(["docker", "import", "-", ref], input=layer.getvalue(), stdout=subprocess.DEVNULL, check=True, timeout=120)
    inspected = json.loads(docker("image", "inspect", ref).stdout)[0]
    image_id, identity = inspected["Id"], image_load.identity(inspected)
    archive = tmp_path / "image.tar"
    docker("save", "-o", str(archive), ref)
    docker("rmi", ref)
    yield ref, image_id, identity, archive
    docker("rmi", "-f", ref, check=False)


def test_the_served_archive_is_loaded_with_the_saved_id_and_identity(saved, tmp_path):
    ref, image_id, identity, archive = saved
    data = archive.read_bytes()
    with serving(tmp_path, archive) as (url, secret):
        result = hf_peer.load_image(url, len(data), hashlib.sha256(data).hexdigest(), secret, SOCKET, ref, identity)
        again = hf_peer.load_image(url, len(data), hashlib.sha256(data).hexdigest(), secret, SOCKET, ref, identity)
    assert result["changed"] and result["image_id"] == image_id and result["identity"] == identity and ref in result["loaded"]
    assert docker("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip() == image_id
    assert not again["changed"] and again["attempts"] == 0


def test_bytes_that_are_not_the_expected_ones_load_nothing(saved, tmp_path):
    ref, image_id, identity, archive = saved
    data = archive.read_bytes()
    with serving(tmp_path, archive) as (url, secret):
        with pytest.raises(hf_peer.FetchError, match="expected"):
            hf_peer.load_image(url, len(data), "0" * 64, secret, SOCKET, ref, identity, attempts=1)
    assert image_load.inspect_image(SOCKET, ref, 10) is None
    assert docker("image", "inspect", image_id, check=False).returncode != 0
