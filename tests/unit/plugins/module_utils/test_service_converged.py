# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils import service_converged

CONFIG = "backend engines\n    server gpu1 10.0.0.1:8020\n"
FILES = [{"path": "/etc/haproxy/haproxy.cfg", "content": CONFIG},
         {"path": "/etc/haproxy/glm53-api-key.map", "content": "check Bearer s3cret\n"}]
BACKENDS = {"servers": [{"host": "gpu1", "name": "gpu1", "address": "10.0.0.1", "port": 8020}], "held_out": []}


def parts(differs):
    return [d["part"] for d in differs]


def converged_box():
    want = service_converged.fingerprint(FILES, BACKENDS)
    return want, {"fingerprint": want}, dict((f["path"], f["content"]) for f in FILES), {"ok": True, "what": ""}


def test_the_box_its_last_converge_left_is_converged():
    want, record, on_disk, service = converged_box()
    assert service_converged.compare(want, record, FILES, on_disk, service) == []
    assert service_converged.summary([]) == "converged"


def test_a_change_in_the_backends_changes_the_fingerprint():
    want = service_converged.fingerprint(FILES, BACKENDS)
    held_out = [{"host": "gpu1", "name": "gpu1", "reason": "failed in smoke_test this run"}]
    fewer = service_converged.fingerprint(FILES, {"servers": [], "held_out": held_out})
    assert want != fewer
    record, on_disk, service = converged_box()[1:]
    assert parts(service_converged.compare(fewer, record, FILES, on_disk, service)) == ["record"]


def test_the_fingerprint_keeps_no_secret_and_follows_each_content():
    want = service_converged.fingerprint(FILES, BACKENDS)
    assert "s3cret" not in want
    other_key = [FILES[0], {"path": FILES[1]["path"], "content": "check Bearer other\n"}]
    assert service_converged.fingerprint(other_key, BACKENDS) != want
    assert service_converged.fingerprint(list(reversed(FILES)), BACKENDS) == want


def test_a_secret_file_enters_the_fingerprint_by_its_presence_and_is_still_compared_on_the_box():
    # A fingerprint shown by a -v run must not let anyone test guesses of the key offline.
    secret = [FILES[0], dict(FILES[1], secret=True)]
    other_key = [FILES[0], {"path": FILES[1]["path"], "content": "check Bearer guess\n", "secret": True}]
    want = service_converged.fingerprint(secret, BACKENDS)
    assert service_converged.fingerprint(other_key, BACKENDS) == want
    assert service_converged.fingerprint([FILES[0], dict(FILES[1], content=None, secret=True)], BACKENDS) != want
    on_disk = dict((f["path"], f["content"]) for f in FILES)
    differs = service_converged.compare(want, {"fingerprint": want}, other_key, on_disk, {"ok": True, "what": ""})
    assert parts(differs) == ["files"] and "s3cret" not in str(differs) and "guess" not in str(differs)


def test_each_part_that_differs_is_named():
    want, record, on_disk, service = converged_box()
    edited = dict(on_disk, **{"/etc/haproxy/haproxy.cfg": CONFIG + "# edited by hand\n"})
    differs = service_converged.compare(want, None, FILES, edited, {"ok": False, "what": "no socket"})
    assert parts(differs) == ["record", "files", "service"]
    assert "/etc/haproxy/haproxy.cfg differs" in differs[1]["what"]
    missing = dict(on_disk, **{"/etc/haproxy/glm53-api-key.map": None})
    assert service_converged.compare(want, record, FILES, missing, service) == [
        {"part": "files", "what": "/etc/haproxy/glm53-api-key.map is missing"}]
    assert service_converged.summary(differs).startswith("differs: record (no record of a completed converge)")


def test_a_file_that_must_be_absent():
    files = [FILES[0], {"path": "/etc/haproxy/glm53-api-key.map", "content": None}]
    want = service_converged.fingerprint(files, BACKENDS)
    left = {"/etc/haproxy/haproxy.cfg": CONFIG, "/etc/haproxy/glm53-api-key.map": "check Bearer old\n"}
    assert service_converged.compare(want, {"fingerprint": want}, files, left, None) == [
        {"part": "files", "what": "/etc/haproxy/glm53-api-key.map is present"}]
    gone = dict(left, **{"/etc/haproxy/glm53-api-key.map": None})
    assert service_converged.compare(want, {"fingerprint": want}, files, gone, None) == []


def test_read_file(tmp_path):
    path = tmp_path / "record.json"
    assert service_converged.read_file(str(path)) is None
    path.write_bytes(b'{"fingerprint": "ab"}\n')
    assert service_converged.read_file(str(path)) == '{"fingerprint": "ab"}\n'


def test_a_record_others_can_read_is_not_converged_and_a_root_only_one_is():
    # The fingerprint covers the API key's file: a world-readable record lets the key be guessed offline.
    want, record, on_disk, service = converged_box()
    differs = service_converged.compare(want, record, FILES, on_disk, service, record_mode=0o644)
    assert parts(differs) == ["record"] and "readable by others" in differs[0]["what"]
    assert service_converged.compare(want, record, FILES, on_disk, service, record_mode=0o600) == []
