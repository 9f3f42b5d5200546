"""The fleet report at the end of site.yml: a real run of site.yml over fake hosts.

The real site.yml, step guard, settings role and fleet report run against a copy of the
collection whose host-touching roles are recording stubs (stub_collection.py). The hosts are
local and their stubs publish the public facts the roles hand each other (docs/development.md)
from the inventory; one fails its host checks with a coded message, one fails pre-flight's
settings checks for real, and one is unreachable (SSH to a closed loopback port).
"""

import json
import os
import sys
import textwrap

import yaml

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import stub_collection  # noqa: E402
from ansible_run import run_playbook  # noqa: E402

REVISION = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
TAG = "5b1d0c8e9a7f6e5d4c3b2a19"

INVENTORY = textwrap.dedent("""\
    all:
      vars:
        ansible_connection: local
        ansible_python_interpreter: {python}
        stub_log_dir: {logs}
        # The image's pins an operator sets (a run that builds the image needs them).
        tensorfold_image_engine_commit: f350cd3e00000000000000000000000000000000
        tensorfold_image_patch_series_commit: eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee
      hosts:
        gpu-a:
          stub_facts:
           gpu_host_checks:
            gpu_host_checks_result: {{status: warn, problems: [{{code: W_P2P, severity: warning, host: gpu-a,
              message: "[W_P2P] gpu-a: NVML reports no peer-to-peer between the cards. NCCL still works over host memory, but more slowly."}}]}}
            tensorfold_image_ref: "glm53-tensorfold:{tag}"
            tensorfold_image_tag: "{tag}"
            weights_fetch_model_revision: "{revision}"
            rank_container_result: {{status: running, endpoint: "http://127.0.0.1:8020", context: 262144, streams: 4,
                                    log_dir: /srv/glm53/logs/current, warnings: []}}
            smoke_test_result: {{status: live, endpoint: "http://gpu-a:8020/v1", reply: Hello., problems: []}}
        gpu-b:
          stub_facts:
           gpu_host_checks:
            gpu_host_checks_result: {{status: pass, problems: []}}
            tensorfold_image_ref: "glm53-tensorfold:{tag}"
            tensorfold_image_tag: "{tag}"
            weights_fetch_model_revision: "{revision}"
            rank_container_result: {{status: running, endpoint: "http://127.0.0.1:8021", context: 131072, streams: 3,
                                    log_dir: /srv/glm53/logs/current,
                                    warnings: ["[W_STREAMS] gpu-b: 3 streams came up, tensorfold_parallel asked 4."]}}
            smoke_test_result: {{status: live, endpoint: "http://gpu-b:8021/v1", reply: Hello., problems: []}}
        gpu-c:
          stub_facts:
           gpu_host_checks:
            gpu_host_checks_result: {{status: fail, problems: [{{code: E_GPU_BUSY, severity: error, host: gpu-c,
              message: "[E_GPU_BUSY] gpu-c: GPU 1 uses 30210 MiB (python3, pid 4242). Stop the workload on that GPU."}}]}}
          stub_fail:
            gpu_host_checks: "[E_GPU_BUSY] gpu-c: GPU 1 uses 30210 MiB (python3, pid 4242). Stop the workload on that GPU."
        gpu-d:
          tensorfold_parallel: 0
        gpu-e:
          ansible_connection: ssh
          ansible_host: 127.0.0.1
          ansible_port: 1
          ansible_ssh_common_args: -o ConnectTimeout=3
    """)


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    return stub_collection.build(tmp_path_factory.mktemp("stub"))


def site(collection, work, inventory, args=()):
    (work / "logs").mkdir()
    # The GPU steps run on group gpu_hosts: the inventory's hosts are GPU boxes.
    tree = yaml.safe_load(inventory)
    tree["all"]["children"] = {"gpu_hosts": {"hosts": tree["all"].pop("hosts")}}
    (work / "hosts.yml").write_text(json.dumps(tree))
    return run_playbook("glm53.tensorfold.site", work / "hosts.yml", cwd=work, extra_args=list(args),
                        env={"ANSIBLE_COLLECTIONS_PATH": str(collection)})


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory, collection):
    work = tmp_path_factory.mktemp("fleet")
    rc, output = site(collection, work, INVENTORY.format(python=sys.executable, tag=TAG, revision=REVISION,
                                                         logs=work / "logs"))
    return work, rc, output


def load(work):
    with open(str(work / "reports" / "fleet-report.json")) as handle:
        report = json.load(handle)
    return report, (work / "reports" / "fleet-report.md").read_text()


def test_report_is_saved_in_the_working_directory_as_markdown_and_json(fleet_run):
    work, rc, output = fleet_run
    assert (work / "reports" / "fleet-report.md").is_file(), output
    assert (work / "reports" / "fleet-report.json").is_file()
    stamped = sorted(p.name for p in (work / "reports").iterdir() if p.name.startswith("fleet-report-"))
    assert len(stamped) == 2 and stamped[0].endswith(".json") and stamped[1].endswith(".md")


def test_each_host_gets_its_status(fleet_run):
    work, rc, output = fleet_run
    report = load(work)[0]
    status = dict((line["host"], line["status"]) for line in report["hosts"])
    assert status == {"gpu-a": "live", "gpu-b": "live", "gpu-c": "failed", "gpu-d": "failed", "gpu-e": "unreachable"}, output
    assert report["summary"]["live"] == 2 and report["summary"]["failed"] == 2 and report["summary"]["unreachable"] == 1


def test_live_hosts_show_endpoint_window_streams_tag_revision_and_warnings(fleet_run):
    work, rc, output = fleet_run
    report, markdown = load(work)
    line = [h for h in report["hosts"] if h["host"] == "gpu-b"][0]
    assert (line["endpoint"], line["context"], line["streams"]) == ("http://gpu-b:8021/v1", 131072, 3)
    assert line["image_tag"] == TAG and line["revision"] == REVISION
    assert line["warnings"] == ["[W_STREAMS] gpu-b: 3 streams came up, tensorfold_parallel asked 4."]
    assert "| gpu-a | LIVE | http://gpu-a:8020/v1 | 262144 | 4 | %s | %s | W_P2P |" % (TAG[:12], REVISION[:12]) in markdown


def test_failed_hosts_say_their_code_step_and_what_to_do(fleet_run):
    work, rc, output = fleet_run
    report, markdown = load(work)
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-c"]["codes"] == ["E_GPU_BUSY"] and lines["gpu-c"]["stage"] == "gpu_host_checks"
    assert lines["gpu-d"]["codes"] == ["E_SETTINGS"] and lines["gpu-d"]["stage"] == "pre-flight"
    assert "- **gpu-c** (failed (E_GPU_BUSY) in gpu_host_checks): [E_GPU_BUSY] gpu-c: GPU 1 uses 30210 MiB" in markdown
    assert "- **gpu-d** (failed (E_SETTINGS) in pre-flight): [E_SETTINGS] gpu-d: tensorfold_parallel is 0." in markdown
    assert "- **gpu-e** (unreachable): Ansible could not reach the host" in markdown


def test_report_is_printed_once_and_the_run_fails_naming_the_failed_hosts(fleet_run):
    work, rc, output = fleet_run
    assert output.count("# GLM-5.3-Flash fleet report") == 1
    assert rc != 0
    assert "gpu-c failed in gpu_host_checks: see its line in the fleet report" in output
    assert "gpu-d failed in pre-flight" in output
    recap = output[output.index("PLAY RECAP"):]
    assert "gpu-a                      : ok=" in recap and [l for l in recap.splitlines() if l.startswith("gpu-a")][0].count("failed=0") == 1


def test_a_fleet_where_every_host_failed_still_gets_its_report(tmp_path, collection):
    rc, output = site(collection, tmp_path, INVENTORY.format(python=sys.executable, tag=TAG, revision=REVISION,
                                                             logs=tmp_path / "logs"), args=["--limit", "gpu-d"])
    report, markdown = load(tmp_path)
    assert [(h["host"], h["status"]) for h in report["hosts"]] == [("gpu-d", "failed")], output
    assert "1 host: 0 LIVE, 1 failed, 0 unreachable" in markdown
    assert rc != 0


def test_a_failed_no_log_task_leaves_its_message_out_of_the_report(tmp_path, collection):
    # ansible-core 2.19 keeps a no_log task's message in ansible_failed_result: the report must not.
    inventory = textwrap.dedent("""\
        all:
          vars: {{ansible_connection: local, ansible_python_interpreter: {python}, stub_log_dir: {logs}}}
          hosts:
            gpu-b: {{stub_no_log: true, stub_fail: {{rank_container: "[E_START] gpu-b: key sk-canary-nolog refused"}}}}
        """).format(python=sys.executable, logs=tmp_path / "logs")
    rc, output = site(collection, tmp_path, inventory, args=["--tags", "restart"])
    assert rc != 0
    line = dict((h["host"], h) for h in load(tmp_path)[0]["hosts"])["gpu-b"]
    assert line["status"] == "failed" and "runs under no_log" in json.dumps(line), line
    for report in (tmp_path / "reports").rglob("*"):
        if report.is_file():
            assert b"sk-canary-nolog" not in report.read_bytes(), report


def test_a_rolling_restart_stops_at_the_first_failed_host_and_the_report_says_why(tmp_path, collection):
    inventory = textwrap.dedent("""\
        all:
          vars: {{ansible_connection: local, ansible_python_interpreter: {python}, stub_log_dir: {logs}}}
          hosts:
            gpu-a: {{}}
            gpu-b: {{stub_fail: {{rank_container: "[E_START] gpu-b: rank 1 exited with status 3. Read the rank log tails above."}}}}
            gpu-c: {{}}
            gpu-d: {{}}
        """).format(python=sys.executable, logs=tmp_path / "logs")
    rc, output = site(collection, tmp_path, inventory, args=["--tags", "restart"])
    assert rc != 0
    # gpu-a went first and is back; gpu-b failed; gpu-c and gpu-d were never touched.
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["gpu-a", "gpu-b"], output
    assert stub_collection.ran(tmp_path / "logs", "gpu-b") == [("rank_container", "restart")], output
    report = load(tmp_path)[0]
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-b"]["status"] == "failed" and lines["gpu-b"]["codes"] == ["E_START"]
    for host in ("gpu-c", "gpu-d"):
        assert lines[host]["status"] == "skipped"
        assert lines[host]["todo"].startswith("The run stopped before restart on this host: gpu-b failed")
    assert lines["gpu-a"]["status"] == "skipped" and "stopped" not in lines["gpu-a"]["todo"]
