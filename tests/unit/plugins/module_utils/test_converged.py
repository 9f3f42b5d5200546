# -*- coding: utf-8 -*-
"""The converged check's comparison, on `docker inspect` output recorded from Docker 20.10
(fixtures/converged/: a labelled container running and exited, its image, /info) and on weights
state written by hf_transfer's own record code over the Hub listing fixture."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import ssl
import subprocess
import threading

from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged, hf_plan, hf_transfer, net
from ansible_collections.glm53.tensorfold.plugins.module_utils.health import health_ok

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
LABEL = "glm53.tensorfold.rank_container"
SETTINGS = "5f1c0a9e8d7b6c5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a"
IMAGE = "glm53-test/debian12:latest"


def recorded(name):
    with open(os.path.join(FIXTURES, "converged", name)) as handle:
        return json.load(handle)


def hub_listing():
    with open(os.path.join(FIXTURES, "hub_tree_recursive.json")) as handle:
        return json.load(handle)


@pytest.fixture
def repo(tmp_path):
    """A repository as hf_snapshot leaves it after a complete run: files, listing, verification records."""
    local, state = tmp_path / "model", tmp_path / ".state" / "weights" / "model"
    local.mkdir()
    state.mkdir(parents=True)
    entries = hub_listing()
    with open(str(state / ("listing-%s.json" % COMMIT)), "w") as handle:
        json.dump({"repo_id": "owner/model", "commit": COMMIT, "entries": entries}, handle)
    records = {}
    for spec in hf_plan.plan_files(entries):
        path = local / spec["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(str(path), "wb") as handle:
            handle.truncate(spec["size"])
        hf_transfer.Snapshot._record(None, records, COMMIT, spec, str(path))
    with open(str(state / "verified.json"), "w") as handle:
        json.dump(records, handle)
    return {"name": "model", "revision": COMMIT, "local_dir": str(local), "state_dir": str(state)}


def have_running(repo):
    return {
        "container": converged.container_facts(recorded("container_running.json"), LABEL),
        "image": converged.image_facts(recorded("image.json")),
        "runtimes": sorted(recorded("info.json")["Runtimes"]),
        "weights": [converged.weights_state(repo)],
        "health": {"ok": True, "status": 200, "error": ""},
    }


def want(repo, **over):
    wanted = {"settings_hash": SETTINGS, "image": IMAGE, "runtime": "runc", "weights": [repo], "health": True}
    wanted.update(over)
    return wanted


def parts(differs):
    return [d["part"] for d in differs]


def test_recorded_container_facts():
    facts = converged.container_facts(recorded("container_running.json"), LABEL)
    assert facts["running"] and facts["ours"] and facts["settings"] == SETTINGS
    assert facts["image_id"] == recorded("image.json")["Id"]
    assert facts["image_ref"] == IMAGE
    assert converged.container_facts(None, LABEL) is None


def test_a_box_that_has_everything_is_converged(repo):
    assert converged.compare(want(repo), have_running(repo)) == []
    assert converged.summary([]) == "converged"


def test_another_settings_fingerprint_is_named(repo):
    differs = converged.compare(want(repo, settings_hash="0" * 64), have_running(repo))
    assert parts(differs) == ["settings"]
    assert "5f1c0a9e8d7b" in differs[0]["what"] and "000000000000" in differs[0]["what"]


def test_a_missing_image_and_a_container_on_another_image_differ(repo):
    have = have_running(repo)
    have["image"] = None
    assert parts(converged.compare(want(repo), have)) == ["image"]
    have["image"] = {"id": "sha256:" + "1" * 64, "tags": ["glm53/tensorfold:new"]}
    differs = converged.compare(want(repo, image="glm53/tensorfold:new"), have)
    assert parts(differs) == ["image"] and "runs image 8b414040e42d" in differs[0]["what"]


def test_an_exited_container_differs_and_health_is_not_blamed(repo):
    have = have_running(repo)
    have["container"] = converged.container_facts(recorded("container_exited.json"), LABEL)
    have["health"] = None
    differs = converged.compare(want(repo), have)
    assert parts(differs) == ["container"]
    assert "exited" in differs[0]["what"]


def test_no_container_at_all(repo):
    have = have_running(repo)
    have["container"], have["health"] = None, None
    assert parts(converged.compare(want(repo), have)) == ["container"]


def test_a_container_without_our_label_is_not_ours(repo):
    inspect = recorded("container_running.json")
    inspect["Config"]["Labels"] = {}
    have = have_running(repo)
    have["container"] = converged.container_facts(inspect, LABEL)
    assert parts(converged.compare(want(repo), have)) == ["container"]


def test_an_unhealthy_api(repo):
    have = have_running(repo)
    have["health"] = {"ok": False, "status": 503, "error": "HTTPError 503"}
    differs = converged.compare(want(repo), have)
    assert parts(differs) == ["health"] and "503" in differs[0]["what"]


def test_a_missing_runtime(repo):
    differs = converged.compare(want(repo, runtime="nvidia"), have_running(repo))
    assert parts(differs) == ["runtime"] and "runc" in differs[0]["what"]


def test_unset_wants_are_not_compared(repo):
    have = have_running(repo)
    have["image"], have["runtimes"] = None, None
    assert converged.compare(want(repo, settings_hash=None, image=None, runtime=None), have) == []


def test_weights_whose_file_changed_after_verification(repo):
    shard = os.path.join(repo["local_dir"], "model-00002-of-00002.safetensors")
    with open(shard, "r+b") as handle:
        handle.write(b"x")  # same size, new mtime: the record no longer holds
    os.utime(shard, ns=(1, 1))
    state = converged.weights_state(repo)
    assert state["unverified"] == ["model-00002-of-00002.safetensors"]
    have = have_running(repo)
    differs = converged.compare(want(repo), have)
    assert parts(differs) == ["weights"] and "1 of 5 files" in differs[0]["what"]


def test_weights_with_a_missing_file_or_no_state(repo, tmp_path):
    os.unlink(os.path.join(repo["local_dir"], "config.json"))
    assert converged.weights_state(repo)["unverified"] == ["config.json"]
    empty = dict(repo, state_dir=str(tmp_path / "nothing"))
    assert "no file listing" in converged.weights_state(empty)["problem"]
    other = dict(repo, revision="a" * 40)
    assert "no file listing" in converged.weights_state(other)["problem"]
    unpinned = dict(repo, revision="main")
    assert "not pinned" in converged.weights_state(unpinned)["problem"]


def test_weights_allow_patterns_limit_the_files(repo):
    state = converged.weights_state(dict(repo, allow_patterns=["*.json"]))
    assert state["files"] == 3 and state["unverified"] == []


def test_several_parts_come_in_a_fixed_order(repo):
    have = have_running(repo)
    have["image"] = None
    os.unlink(os.path.join(repo["local_dir"], "config.json"))
    have["weights"] = [converged.weights_state(repo)]
    differs = converged.compare(want(repo, settings_hash="0" * 64), have)
    assert parts(differs) == ["settings", "image", "weights"]
    assert converged.summary(differs).startswith("differs: settings (")


def test_health_reader_turns_failures_into_not_ok():
    def refuse(url, timeout):
        raise OSError("Connection refused")

    assert converged.read_health("http://x/health", 1, getter=lambda url, timeout: (200, b"")) == {
        "ok": True, "status": 200, "error": ""}
    assert converged.read_health("http://x/health", 1, getter=lambda url, timeout: (503, b"loading")) == {
        "ok": False, "status": 503, "error": "HTTP 503"}
    assert converged.read_health("http://x/health", 1, getter=refuse) == {"ok": False, "status": None, "error": "OSError"}


def test_the_engines_health_must_say_ok_in_its_body():
    # An engine still loading may answer 200 with another status: not healthy, and the body says why.
    def answer(body):
        return lambda url, timeout: (200, body)

    assert converged.read_health("http://x/health", 1, getter=answer(b'{"status":"loading"}'), body_ok=health_ok) == {
        "ok": False, "status": 200, "error": 'HTTP 200 but not ok: {"status":"loading"}'}
    assert converged.read_health("http://x/health", 1, getter=answer(b""), body_ok=health_ok)["error"] == (
        "HTTP 200 but not ok: no body")
    assert converged.read_health("http://x/health", 1, getter=answer(b'{"status": "ok"}'), body_ok=health_ok) == {
        "ok": True, "status": 200, "error": ""}


@pytest.fixture
def local_server():
    """A server on loopback answering GET /ok with 200 and anything else with 503; yields its base URL."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            status = 200 if self.path == "/ok?x=1" else 503
            body = ("seen %s" % self.path).encode()
            if self.headers.get("Authorization"):
                body += (" with %s" % self.headers["Authorization"]).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_http_get_asks_the_box_itself_past_a_proxy_in_the_environment(local_server, monkeypatch):
    # A proxy that does not exist: the GET works only because it goes straight to the address.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:%d" % closed.getsockname()[1])
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:%d" % closed.getsockname()[1])
    closed.close()
    assert net.http_get(local_server + "/ok?x=1", 2) == (200, b"seen /ok?x=1")
    assert net.http_get(local_server + "/health", 2) == (503, b"seen /health")
    assert net.http_get(local_server + "/health", 2, headers={"Authorization": "Bearer k"}) == (
        503, b"seen /health with Bearer k")
    assert converged.read_health(local_server + "/health", 2)["error"] == "HTTP 503"


def test_http_get_over_https_takes_the_boxs_self_signed_certificate(tmp_path):
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=not-this-host",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert net.http_get("https://127.0.0.1:%d/health" % server.server_address[1], 5) == (200, b"ok")
    finally:
        server.shutdown()
        server.server_close()


def test_http_get_of_a_closed_port_or_another_scheme_raises():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(OSError):
        net.http_get("http://127.0.0.1:%d/health" % port, 2)
    assert converged.read_health("ftp://127.0.0.1/health", 2) == {
        "ok": False, "status": None, "error": "ValueError not an http(s) URL: ftp://127.0.0.1/health"}


# Written by hand in the text exposition format the node exporter serves (labels sorted by name),
# with the series the monitoring role's textfile holds.
NODE_METRICS = b"""# HELP glm53_data_dir_info Metric read from /var/lib/prometheus/node-exporter/glm53.prom
# TYPE glm53_data_dir_info gauge
glm53_data_dir_info{mountpoint="/",path="/srv/glm53"} 1
node_load1 0.5
"""


def test_node_exporter_serving_the_data_folder_series_is_converged():
    url = "http://127.0.0.1:9100/metrics"
    asked = []

    def serve(body, status=200):
        def getter(u, timeout):
            asked.append(u)
            return status, body
        return getter

    record = {"url": url}
    assert converged.node_exporter_state(record, "/srv/glm53", 1, getter=serve(NODE_METRICS)) == {
        "converged": True, "what": ""}
    assert asked == [url]
    # Another data folder (the setting moved), or no textfile series at all: not converged.
    other = converged.node_exporter_state(record, "/data/glm53", 1, getter=serve(NODE_METRICS))
    assert not other["converged"] and "/data/glm53" in other["what"]
    assert not converged.node_exporter_state(record, "/srv/glm53", 1, getter=serve(b"node_load1 0.5\n"))["converged"]
    # Never deployed on this box (the monitoring group is new): not converged, nothing asked.
    assert converged.node_exporter_state(None, "/srv/glm53", 1, getter=serve(NODE_METRICS)) == {
        "converged": False, "what": "no record of the node exporter's deploy"}
    assert len(asked) == 3

    def refuse(u, timeout):
        raise OSError("Connection refused")

    down = converged.node_exporter_state(record, "/srv/glm53", 1, getter=refuse)
    assert down == {"converged": False, "what": "GET %s: OSError" % url}
    assert converged.node_exporter_state(record, "/srv/glm53", 1, getter=serve(NODE_METRICS, 500)) == {
        "converged": False, "what": "GET %s: HTTP 500" % url}


def write_record(state_dir, **over):
    record = {"settings": "a" * 64, "container": SETTINGS, "image": IMAGE, "image_tag": "latest",
              "endpoint": "http://127.0.0.1:8020/v1", "public_endpoint": "http://box:8020/v1", "weights": []}
    record.update(over)
    with open(os.path.join(str(state_dir), converged.RECORD), "w") as handle:
        json.dump(record, handle)
    return record


def test_the_deploy_record_gives_what_the_run_wants(tmp_path, repo):
    record = write_record(tmp_path, weights=[repo])
    assert converged.read_record(str(tmp_path)) == record
    wants = converged.record_wants(record, "a" * 64)
    assert wants["settings_hash"] == SETTINGS and wants["image"] == IMAGE and wants["weights"] == [repo]
    assert wants["health_url"] == "http://127.0.0.1:8020/health"
    wanted = want(repo, run_settings=wants["run_settings"], recorded_settings=wants["recorded_settings"])
    assert converged.compare(wanted, have_running(repo)) == []


def test_no_record_or_other_settings_differ_as_record(tmp_path, repo):
    assert converged.read_record(str(tmp_path)) is None
    write_record(tmp_path, container="")  # a record without the container's label is no record
    assert converged.read_record(str(tmp_path)) is None
    differs = converged.compare(want(repo, run_settings="b" * 64, recorded_settings=None), have_running(repo))
    assert parts(differs) == ["record"] and "no record" in differs[0]["what"]
    differs = converged.compare(want(repo, run_settings="b" * 64, recorded_settings="a" * 64), have_running(repo))
    assert parts(differs) == ["record"] and "bbbbbbbbbbbb" in differs[0]["what"] and "aaaaaaaaaaaa" in differs[0]["what"]


def test_what_a_box_lacks_is_what_a_converged_box_could_lend(tmp_path, repo):
    have = have_running(repo)
    assert converged.lacks(want(repo), converged.compare(want(repo), have)) == []  # no record asked for
    # Another setting or a stopped container: the box still holds a good image and good weights.
    wanted = want(repo, settings_hash="0" * 64, run_settings="b" * 64, recorded_settings="a" * 64)
    assert converged.lacks(wanted, converged.compare(wanted, have)) == []
    have["image"] = None
    assert converged.lacks(want(repo), converged.compare(want(repo), have)) == ["image"]
    os.utime(os.path.join(repo["local_dir"], "model-00002-of-00002.safetensors"), ns=(1, 1))
    have["weights"] = [converged.weights_state(repo)]
    assert converged.lacks(want(repo), converged.compare(want(repo), have)) == ["image", "weights"]
    # A new box: no record, so nothing it holds is known good, whatever its Docker has.
    wanted = want(repo, run_settings="b" * 64, recorded_settings=None)
    assert converged.lacks(wanted, converged.compare(wanted, have_running(repo))) == ["image", "weights"]


def test_another_api_key_differs(repo):
    have = have_running(repo)
    have["api_key_matches"] = False
    assert parts(converged.compare(want(repo), have)) == ["api_key"]
    have["api_key_matches"] = None  # not compared
    assert converged.compare(want(repo), have) == []


def test_served_reads_the_startup_line():
    line = ("CUDA sm_120 device 0 (NVIDIA RTX PRO 6000 Blackwell Workstation Edition): model 82.10 GiB; "
            "4 streams at once, 2.31 GiB each at a 1048576-token window, of 9.4 GiB left after a 4.0 GiB reserve")
    assert converged.served("loading\n" + line + "\n") == {"context": 1048576, "streams": 4}
    assert converged.served(None) == {"context": None, "streams": None}


def test_a_converged_box_stands_for_its_recorded_deploy():
    record = {"endpoint": "http://127.0.0.1:8020/v1", "public_endpoint": "http://gpu1:8020/v1", "image": "glm53/tf:abc",
              "image_tag": "abc", "revision": "r1", "checks": {"status": "warn", "problems": [{"code": "W_X"}]}}
    facts = converged.stands_for(record, {"context": 65536, "streams": 4}, "/srv/glm53")
    assert facts["smoke_test_result"] == {"status": "live", "endpoint": "http://gpu1:8020/v1", "problems": []}
    assert facts["rank_container_result"]["endpoint"] == "http://127.0.0.1:8020/v1"
    assert (facts["rank_container_result"]["context"], facts["rank_container_result"]["streams"]) == (65536, 4)
    assert facts["rank_container_result"]["log_dir"] == "/srv/glm53/logs/current"
    assert facts["gpu_host_checks_result"]["status"] == "warn"
    assert (facts["tensorfold_image_ref"], facts["tensorfold_image_tag"], facts["weights_fetch_model_revision"]) == (
        "glm53/tf:abc", "abc", "r1")


def test_without_a_public_endpoint_the_engines_own_is_the_live_one():
    facts = converged.stands_for({"endpoint": "http://127.0.0.1:8020/v1"}, {}, "/d")
    assert facts["smoke_test_result"]["endpoint"] == "http://127.0.0.1:8020/v1"
    assert facts["gpu_host_checks_result"] == {} and facts["tensorfold_image_tag"] == ""


def test_only_whole_repositories_count_as_verified(repo, tmp_path):
    whole = converged.weights_state(repo)
    assert converged.verified_weights([repo], [whole]) == [repo]
    # A file changed since its verification, a state never recorded, a listing with no file to serve.
    os.utime(os.path.join(repo["local_dir"], "config.json"), ns=(1, 1))
    changed = converged.weights_state(repo)
    unread = converged.weights_state(dict(repo, state_dir=str(tmp_path / "nothing")))
    empty = converged.weights_state(dict(repo, allow_patterns=["*.none"]))
    assert converged.verified_weights([repo] * 3, [changed, unread, empty]) == []
    other = dict(repo, name="drafter")
    assert converged.verified_weights([other, repo], [whole, changed]) == [other]
