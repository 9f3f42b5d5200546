# -*- coding: utf-8 -*-
"""glm53.tensorfold.converged_info run by real `ansible` on localhost against this machine's Docker
engine: a container of our own with the rank_container labels, weights state written by the real
transfer code, and a /health endpoint on loopback. One box, converged; then one part at a time
made to differ, and the answer must name exactly that part. Every test runs both ways the action
reads a box: the module (no pipelining) and the box reader (pipelining: the host's python3 runs
module_utils/converged.py with no AnsiballZ), which must give the same answers."""

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import uuid

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan, hf_transfer  # noqa: E402

ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")
IMAGE = "glm53-test/debian12:latest"
LABEL = "glm53.tensorfold.rank_container"
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
SETTINGS = hashlib.sha256(b"the settings of this test").hexdigest()


def docker_ok():
    try:
        return subprocess.run(["docker", "image", "inspect", IMAGE], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False




@pytest.fixture(autouse=True)
def docker_and_base_image():
    """A missing Docker engine or base image fails these tests (scripts/bootstrap.sh makes both)."""
    assert docker_ok(), "needs a running Docker engine and the base image %s (scripts/bootstrap.sh)" % IMAGE


class Health(http.server.BaseHTTPRequestHandler):
    """/health as the engine contract answers it with keys configured: {"status": "ok"}."""
    status = 200
    body = b'{"status":"ok"}'

    def do_GET(self):  # noqa: N802
        self.send_response(Health.status if self.path == "/health" else 404)
        self.send_header("Content-Length", str(len(Health.body)))
        self.end_headers()
        self.wfile.write(Health.body)

    def log_message(self, *args):
        pass


# How the action reads the box: ansible_pipelining, and the answer's read_with.
WAYS = {"module": "false", "box reader": "true"}


@pytest.fixture(scope="module", params=sorted(WAYS))
def way(request):
    return request.param


def ansible_result(way, args):
    """`ansible localhost -m glm53.tensorfold.converged_info` read the way asked: (rc, output, result)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([ANSIBLE, "localhost", "-o", "-m", "glm53.tensorfold.converged_info", "-a", json.dumps(args),
                           "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "ansible_pipelining=%s" % WAYS[way]],
                          cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)
    line = [x for x in proc.stdout.splitlines() if x.startswith("localhost |")][0]
    result = json.loads(line.split("=>", 1)[1])
    assert result["read_with"] == way, result
    return proc.returncode, proc.stdout, result


@pytest.fixture(scope="module")
def box(tmp_path_factory, way):
    work = tmp_path_factory.mktemp("box")
    local, state = work / "model", work / ".state" / "weights" / "model"
    local.mkdir()
    state.mkdir(parents=True)
    body = b"weights" * 1000
    entries = [{"type": "file", "path": "config.json", "size": 2, "oid": hashlib.sha1(b"blob 2\0{}").hexdigest()},
               {"type": "file", "path": "model.safetensors", "size": len(body), "oid": "0" * 40,
                "lfs": {"oid": hashlib.sha256(body).hexdigest(), "size": len(body), "pointerSize": 130}}]
    (local / "config.json").write_bytes(b"{}")
    (local / "model.safetensors").write_bytes(body)
    listing = {"repo_id": "o/m", "commit": COMMIT, "entries": entries}
    (state / ("listing-%s.json" % COMMIT)).write_text(json.dumps(listing))
    records = {}
    for spec in hf_plan.plan_files(entries):
        hf_transfer.Snapshot._record(None, records, COMMIT, spec, str(local / spec["path"]))
    (state / "verified.json").write_text(json.dumps(records))

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    name = "glm53-converged-test-%s" % uuid.uuid4().hex[:8]
    subprocess.check_call(["docker", "run", "-d", "--name", name, "--label", "%s=true" % LABEL,
                           "--label", "%s.settings=%s" % (LABEL, SETTINGS), IMAGE, "sleep", "600"],
                          stdout=subprocess.DEVNULL, timeout=120)
    try:
        yield {"way": way, "name": name, "weights": [{"name": "model", "revision": COMMIT, "local_dir": str(local),
                                          "state_dir": str(state)}],
               "health_url": "http://127.0.0.1:%d/health" % server.server_address[1], "local": local}
    finally:
        server.shutdown()
        subprocess.call(["docker", "rm", "-f", name], stdout=subprocess.DEVNULL, timeout=60)


def converged_info(box, **over):
    args = {"container_name": box["name"], "settings_hash": SETTINGS, "image": IMAGE, "runtime": "runc",
            "weights": box["weights"], "health_url": box["health_url"]}
    args.update(over)
    args = dict((key, value) for key, value in args.items() if value is not None)
    rc, out, result = ansible_result(box["way"], args)
    assert rc == 0, out
    assert result["changed"] is False
    return result


def test_a_converged_box_and_each_part_that_can_differ(box):
    got = converged_info(box)
    assert got["converged"] is True, got["summary"]
    assert got["have"]["container"]["running"] and got["have"]["health"]["ok"]

    got = converged_info(box, settings_hash="0" * 64)
    assert [d["part"] for d in got["differs"]] == ["settings"]

    got = converged_info(box, runtime="nvidia")
    assert [d["part"] for d in got["differs"]] == ["runtime"]

    got = converged_info(box, image="glm53-test/not-here:1")
    assert [d["part"] for d in got["differs"]] == ["image"]

    (box["local"] / "config.json").write_bytes(b"[]")  # same size, new bytes and mtime
    got = converged_info(box)
    assert [d["part"] for d in got["differs"]] == ["weights"]
    assert "config.json" in got["differs"][0]["what"]


def test_the_deploy_record_says_what_the_run_wants(box, tmp_path):
    """data_dir mode: the wanted container label, image and health URL come from the record, the
    run's settings fingerprint is compared with the recorded one, the key file with the run's key."""
    run = "a" * 64
    state = tmp_path / ".state"
    state.mkdir()
    logs = tmp_path / "logs" / "current"
    logs.mkdir(parents=True)
    (logs / "rank0.log").write_text(
        "CUDA sm_120 device 0 (NVIDIA RTX PRO 6000 Blackwell Workstation Edition): model 82.10 GiB; "
        "4 streams at once, 2.31 GiB each at a 524288-token window, of 9.4 GiB left after a 4.0 GiB reserve\n")
    record = {"settings": run, "container": SETTINGS, "image": IMAGE, "weights": [],
              "endpoint": box["health_url"][:-len("/health")] + "/v1"}
    args = {"container_name": box["name"], "runtime": "runc", "data_dir": str(tmp_path), "run_settings": run}

    got = converged_info(box, **dict(args, settings_hash=None, image=None, weights=[], health_url=None))
    assert [d["part"] for d in got["differs"]] == ["record"] and "no record" in got["differs"][0]["what"]

    (state / "deployed.json").write_text(json.dumps(record))
    got = converged_info(box, **dict(args, settings_hash=None, image=None, weights=[], health_url=None))
    assert got["converged"] is True, got["summary"]
    assert got["have"]["health"]["ok"] and got["served"] == {"context": 524288, "streams": 4}
    assert got["record"]["image"] == IMAGE

    got = converged_info(box, **dict(args, run_settings="b" * 64, settings_hash=None, image=None, weights=[],
                                     health_url=None))
    assert [d["part"] for d in got["differs"]] == ["record"]

    got = converged_info(box, **dict(args, api_key="sk-test", settings_hash=None, image=None, weights=[],
                                     health_url=None))
    assert [d["part"] for d in got["differs"]] == ["api_key"]
    assert "sk-test" not in json.dumps(got)
    # The key as this release writes it, and as earlier ones did (with a newline); another key differs.
    for text, same in (("sk-test2", False), ("sk-test\n", True), ("sk-test", True)):
        (state / "api-key").write_text(text)
        got = converged_info(box, **dict(args, api_key="sk-test", settings_hash=None, image=None, weights=[],
                                         health_url=None))
        assert got["converged"] is same, got["summary"]

    record["container"] = "0" * 64
    (state / "deployed.json").write_text(json.dumps(record))
    got = converged_info(box, **dict(args, api_key="sk-test", settings_hash=None, image=None, weights=[],
                                     health_url=None))
    assert [d["part"] for d in got["differs"]] == ["settings"]


def test_health_and_a_stopped_container(box):
    Health.status = 503
    try:
        got = converged_info(box, weights=[])
        assert [d["part"] for d in got["differs"]] == ["health"]
    finally:
        Health.status = 200
    # A 200 that does not say ok is an engine still loading: not converged.
    Health.body = b'{"status":"loading"}'
    try:
        got = converged_info(box, weights=[])
        assert [(d["part"], d["what"]) for d in got["differs"]] == [
            ("health", 'GET /health: HTTP 200 but not ok: {"status":"loading"}')], got["differs"]
    finally:
        Health.body = b'{"status":"ok"}'
    subprocess.check_call(["docker", "stop", "-t", "0", box["name"]], stdout=subprocess.DEVNULL, timeout=60)
    got = converged_info(box, weights=[])
    assert [d["part"] for d in got["differs"]] == ["container"]


def test_an_unreachable_docker_engine_is_a_coded_failure(box):
    rc, out, result = ansible_result(box["way"], {"docker_host": "unix:///nonexistent.sock", "host_label": "box1"})
    assert rc != 0 and result["code"] == "E_DOCKER", out
    assert "[E_DOCKER] box1: cannot read the Docker engine at unix:///nonexistent.sock" in result["msg"]


def test_problems_name_the_inventory_host_when_no_host_label_is_given(box):
    rc, out, result = ansible_result(box["way"], {"docker_host": "unix:///nonexistent.sock"})
    assert rc != 0 and "[E_DOCKER] localhost: cannot read the Docker engine" in result["msg"], out


BATCH_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Read the boxes of the batch from one worker
      glm53.tensorfold.converged_info:
        container_name: "{{ box_container }}"
        runtime: runc
        data_dir: "{{ box_data_dir }}"
        run_settings: "{{ box_run_settings }}"
        api_key: "{{ box_api_key }}"
        hosts: "{{ ansible_play_batch | select('in', groups.gpu_hosts) | list }}"
      register: read
      run_once: true
    - name: Show what every host got
      ansible.builtin.debug:
        msg: "ANSWER {{ read | to_json }}"
"""


@pytest.mark.parametrize("check_mode", [False, True])
def test_one_worker_reads_every_box_of_the_batch(box, tmp_path, check_mode):
    """``hosts`` (site.yml's fast path): the first host's worker reads each listed host with that
    host's own variables and connection; the answers come back under ``boxes``, registered on every
    host of the play; a host not listed is not read; the keys stay masked. The same answers in
    check mode (site.yml --check takes the fast path): the read changes nothing."""
    subprocess.check_call(["docker", "start", box["name"]], stdout=subprocess.DEVNULL, timeout=60)  # stopped above
    run = "c" * 64
    record = {"settings": run, "container": SETTINGS, "image": IMAGE, "weights": [],
              "endpoint": box["health_url"][:-len("/health")] + "/v1"}
    dirs = {}
    for name in ("box-a", "box-b", "gateway"):
        dirs[name] = tmp_path / name
        (dirs[name] / ".state").mkdir(parents=True)
    (dirs["box-a"] / ".state" / "deployed.json").write_text(json.dumps(record))  # box-b has no record
    (dirs["box-a"] / ".state" / "api-key").write_text("sk-box-a-secret")  # each box is read with its own key
    local = dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                 ansible_pipelining=WAYS[box["way"]], box_container=box["name"], box_run_settings=run)
    hosts = dict((name, dict(local, box_data_dir=str(path), box_api_key="sk-%s-secret" % name))
                 for name, path in dirs.items())
    # box-c's variables do not template: its own failed answer, no other host's.
    hosts["box-c"] = dict(hosts["box-b"], box_data_dir="{{ nowhere_defined }}")
    inventory = {"all": {"children": {"gateways": {"hosts": {"gateway": hosts["gateway"]}},
                                      "gpu_hosts": {"hosts": dict((name, hosts[name]) for name in ("box-a", "box-b", "box-c"))}}}}
    (tmp_path / "hosts.json").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(BATCH_PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(tmp_path / "hosts.json"),
                           str(tmp_path / "play.yml")] + (["--check"] if check_mode else []), cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    read, shown = json.loads(proc.stdout[proc.stdout.index("{"):])["plays"][0]["tasks"]
    assert not read["hosts"]["gateway"]["changed"], read["hosts"]["gateway"]
    # One worker, on the play's first host: here the gateway, which is not read itself.
    assert sorted(read["hosts"]) == ["gateway"], read["hosts"].keys()
    answers = [json.loads(shown["hosts"][name]["msg"].split("ANSWER ", 1)[1]) for name in ("box-a", "box-b", "box-c", "gateway")]
    assert all(answer == answers[0] for answer in answers), answers  # every host holds it
    boxes = answers[0]["boxes"]
    assert sorted(boxes) == ["box-a", "box-b", "box-c"], boxes
    assert boxes["box-c"]["failed"] is True and "nowhere_defined" in boxes["box-c"]["msg"], boxes["box-c"]
    # Each box read with its own data_dir and key: box-a's record and key file hold, box-b has neither.
    assert boxes["box-a"]["converged"] is True and boxes["box-a"]["read_with"] == box["way"], boxes["box-a"]
    assert [d["part"] for d in boxes["box-b"]["differs"]] == ["record", "api_key"], boxes["box-b"]
    assert "secret" not in proc.stdout


def test_many_boxes_are_read_by_several_processes_each_with_its_own_answer(box, tmp_path):
    """With enough hosts the worker forks and each process reads its share (each_host.shards):
    every box still gets its own answer, whichever process read it."""
    from ansible_collections.glm53.tensorfold.plugins.plugin_utils import each_host  # pylint: disable=import-outside-toplevel
    subprocess.check_call(["docker", "start", box["name"]], stdout=subprocess.DEVNULL, timeout=60)
    run = "d" * 64
    record = {"settings": run, "container": SETTINGS, "image": IMAGE, "weights": [],
              "endpoint": box["health_url"][:-len("/health")] + "/v1"}
    local = dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                 ansible_pipelining=WAYS[box["way"]], box_container=box["name"], box_run_settings=run)
    names = ["box-%02d" % number for number in range(2 * each_host.SHARD_HOSTS + 1)]
    hosts = {}
    for number, name in enumerate(names):
        data = tmp_path / name
        (data / ".state").mkdir(parents=True)
        if number % 3 == 0:  # every third box has a deploy record (and its own key)
            (data / ".state" / "deployed.json").write_text(json.dumps(record))
            (data / ".state" / "api-key").write_text("sk-%s-secret" % name)
        hosts[name] = dict(local, box_data_dir=str(data), box_api_key="sk-%s-secret" % name)
    inventory = {"all": {"children": {"gateways": {"hosts": {"gateway": dict(hosts[names[0]])}},
                                      "gpu_hosts": {"hosts": hosts}}}}
    (tmp_path / "hosts.json").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(BATCH_PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-vvv", "-i",
                           str(tmp_path / "hosts.json"), str(tmp_path / "play.yml")], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    processes = len(each_host.shards(names, os.cpu_count()))
    assert "each_host: %d hosts read by %d processes" % (len(names), processes) in proc.stdout, proc.stdout[-3000:]
    # -vvv's lines come first; the JSON callback's document is the rest, from a line of its own.
    read = json.loads(proc.stdout[proc.stdout.index("\n{\n"):])["plays"][0]["tasks"][0]
    boxes = read["hosts"]["gateway"]["boxes"]
    assert sorted(boxes) == names, sorted(boxes)
    for number, name in enumerate(names):
        assert boxes[name]["converged"] is (number % 3 == 0), (name, boxes[name].get("summary"))
    assert "secret" not in json.dumps(boxes)
