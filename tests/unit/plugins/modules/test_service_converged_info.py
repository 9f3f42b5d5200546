# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""service_converged_info on real files and a real unix socket: what a converge leaves is
converged; an edited file, a new backend, a service that does not answer are not."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket

import pytest

from ansible_collections.glm53.tensorfold.plugins.modules import service_converged_info


@pytest.fixture
def box(tmp_path):
    config = tmp_path / "haproxy.cfg"
    config.write_text("backend engines\n    server gpu1 10.0.0.1:8020\n")
    key_map = tmp_path / "glm53-api-key.map"
    key_map.write_text("check Bearer s3cret\n")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "admin.sock"))
    listener.listen(5)
    yield {"record": str(tmp_path / "record.json"), "socket": str(tmp_path / "admin.sock"),
           "files": [{"path": str(config), "content": config.read_text()},
                     {"path": str(key_map), "content": key_map.read_text()}],
           "inputs": {"servers": [{"host": "gpu1", "name": "gpu1", "address": "10.0.0.1", "port": 8020}], "held_out": []}}
    listener.close()


def ask(run_module, box, **over):
    args = dict(record=box["record"], files=box["files"], inputs=box["inputs"], probe_socket=box["socket"])
    args.update(over)
    return run_module(service_converged_info, **args)


def converge(run_module, box):
    first = ask(run_module, box)
    with open(box["record"], "w") as handle:
        json.dump({"fingerprint": first["fingerprint"]}, handle)
    os.chmod(box["record"], 0o600)  # root-only, as the roles write it
    return first


def test_without_a_record_it_differs_then_the_record_makes_it_converged(run_module, box):
    first = converge(run_module, box)
    assert not first["converged"] and [d["part"] for d in first["differs"]] == ["record"]
    again = ask(run_module, box)
    assert again["converged"] and again["summary"] == "converged" and again["changed"] is False
    assert again["fingerprint"] == first["fingerprint"]


def test_a_record_others_can_read_differs_until_a_converge_writes_it_root_only(run_module, box):
    converge(run_module, box)
    os.chmod(box["record"], 0o644)  # as an older release left Prometheus' record
    answer = ask(run_module, box)
    assert not answer["converged"] and [d["part"] for d in answer["differs"]] == ["record"]
    os.chmod(box["record"], 0o600)
    assert ask(run_module, box)["converged"]


def test_a_new_backend_an_edited_file_and_a_silent_service_differ(run_module, box, tmp_path):
    converge(run_module, box)
    more = dict(box["inputs"], servers=box["inputs"]["servers"] + [
        {"host": "gpu2", "name": "gpu2", "address": "10.0.0.2", "port": 8020}])
    assert [d["part"] for d in ask(run_module, box, inputs=more)["differs"]] == ["record"]
    with open(box["files"][0]["path"], "a") as handle:
        handle.write("# edited by hand\n")
    assert ask(run_module, box)["differs"] == [{"part": "files", "what": "%s differs" % box["files"][0]["path"]}]
    silent = ask(run_module, box, probe_socket=str(tmp_path / "none.sock"))
    assert "service" in [d["part"] for d in silent["differs"]]


def test_the_secret_is_not_in_the_answer(run_module, box):
    answer = ask(run_module, box)
    assert "s3cret" not in json.dumps(answer)
