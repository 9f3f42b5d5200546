"""The fleet report as site.yml renders it: a real ansible-playbook run over fake hosts.

The hosts are local (connection local) and publish the public facts the roles hand each other
(docs/development.md) from their inventory; one fails its host checks with a coded message, one
fails pre-flight's settings checks for real, and one is unreachable (SSH to a closed loopback
port). The plays use site.yml's own pattern: block + the fleet_report role's record_failure,
gate and reached_end entries, and the fleet_report role at the end.
"""

import json
import os
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import run_playbook  # noqa: E402

REVISION = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
TAG = "5b1d0c8e9a7f6e5d4c3b2a19"

INVENTORY = textwrap.dedent("""\
    all:
      vars:
        ansible_connection: local
        ansible_python_interpreter: {python}
      hosts:
        gpu-a:
          fake_facts:
            gpu_host_checks_result: {{status: warn, problems: [{{code: W_P2P, severity: warning, host: gpu-a,
              message: "[W_P2P] gpu-a: NVML reports no peer-to-peer between the cards. NCCL still works over host memory, but more slowly."}}]}}
            tensorfold_image_ref: "glm53-tensorfold:{tag}"
            tensorfold_image_tag: "{tag}"
            weights_fetch_model_revision: "{revision}"
            rank_container_result: {{status: running, endpoint: "http://127.0.0.1:8020", context: 262144, streams: 4,
                                    log_dir: /srv/glm53/logs/current, warnings: []}}
            smoke_test_result: {{status: live, endpoint: "http://gpu-a:8020/v1", reply: Hello., problems: []}}
        gpu-b:
          fake_facts:
            gpu_host_checks_result: {{status: pass, problems: []}}
            tensorfold_image_ref: "glm53-tensorfold:{tag}"
            tensorfold_image_tag: "{tag}"
            weights_fetch_model_revision: "{revision}"
            rank_container_result: {{status: running, endpoint: "http://127.0.0.1:8021", context: 131072, streams: 3,
                                    log_dir: /srv/glm53/logs/current,
                                    warnings: ["[W_STREAMS] gpu-b: 3 streams came up, tensorfold_parallel asked 4."]}}
            smoke_test_result: {{status: live, endpoint: "http://gpu-b:8021/v1", reply: Hello., problems: []}}
        gpu-c:
          fake_facts:
            gpu_host_checks_result: {{status: fail, problems: [{{code: E_GPU_BUSY, severity: error, host: gpu-c,
              message: "[E_GPU_BUSY] gpu-c: GPU 1 uses 30210 MiB (python3, pid 4242). Stop the workload on that GPU."}}]}}
          fake_failure: "[E_GPU_BUSY] gpu-c: GPU 1 uses 30210 MiB (python3, pid 4242). Stop the workload on that GPU."
        gpu-d:
          tensorfold_parallel: 0
        gpu-e:
          ansible_connection: ssh
          ansible_host: 127.0.0.1
          ansible_port: 1
          ansible_ssh_common_args: -o ConnectTimeout=3
    """)

# site.yml's last play, as it is there.
REPORT_PLAY = textwrap.dedent("""\

    - name: Fleet report
      hosts: all
      gather_facts: false
      tasks:
        - name: Mark the hosts that came through
          ansible.builtin.import_role:
            name: glm53.tensorfold.fleet_report
            tasks_from: reached_end
        - name: Print and save the fleet report
          ansible.builtin.import_role:
            name: glm53.tensorfold.fleet_report
    """)

PLAYBOOK = textwrap.dedent("""\
    - name: Pre-flight as site.yml runs it
      hosts: all
      gather_facts: false
      tasks:
        - name: Check the recipe's settings
          block:
            - name: Check the settings of this host
              ansible.builtin.import_role:
                name: glm53.tensorfold.tensorfold
          rescue:
            - name: Record the failure
              ansible.builtin.import_role:
                name: glm53.tensorfold.fleet_report
                tasks_from: record_failure
              vars:
                fleet_report_stage: pre-flight
            - name: Leave the run
              ansible.builtin.meta: end_host

    - name: Host checks stand-in (publishes the fake facts; gpu-c fails with its code)
      hosts: all
      gather_facts: false
      tasks:
        - name: Gate
          ansible.builtin.import_role:
            name: glm53.tensorfold.fleet_report
            tasks_from: gate
          vars:
            fleet_report_gate_step: gpu_host_checks
        - name: Check the host
          block:
            - name: Touch the host (an unreachable one drops out here)
              ansible.builtin.ping:
            - name: Publish this host's facts
              ansible.builtin.set_fact:
                gpu_host_checks_result: "{{ fake_facts.gpu_host_checks_result }}"
            - name: Publish the later roles' facts
              ansible.builtin.set_fact:
                tensorfold_image_ref: "{{ fake_facts.tensorfold_image_ref }}"
                tensorfold_image_tag: "{{ fake_facts.tensorfold_image_tag }}"
                weights_fetch_model_revision: "{{ fake_facts.weights_fetch_model_revision }}"
                rank_container_result: "{{ fake_facts.rank_container_result }}"
                smoke_test_result: "{{ fake_facts.smoke_test_result }}"
              when: fake_failure is not defined
            - name: Fail as gpu_host_checks does
              ansible.builtin.fail:
                msg: ["{{ fake_failure }}"]
              when: fake_failure is defined
          rescue:
            - name: Record the failure
              ansible.builtin.import_role:
                name: glm53.tensorfold.fleet_report
                tasks_from: record_failure
              vars:
                fleet_report_stage: gpu_host_checks
            - name: Leave the run
              ansible.builtin.meta: end_host
    """) + REPORT_PLAY


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("fleet")
    (work / "hosts.yml").write_text(INVENTORY.format(python=sys.executable, tag=TAG, revision=REVISION))
    (work / "report.yml").write_text(PLAYBOOK)
    rc, output = run_playbook(work / "report.yml", work / "hosts.yml", cwd=work)
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


def test_a_fleet_where_every_host_failed_still_gets_its_report(tmp_path):
    (tmp_path / "hosts.yml").write_text(INVENTORY.format(python=sys.executable, tag=TAG, revision=REVISION))
    (tmp_path / "report.yml").write_text(PLAYBOOK)
    rc, output = run_playbook(tmp_path / "report.yml", tmp_path / "hosts.yml", cwd=tmp_path, extra_args=["--limit", "gpu-d"])
    report, markdown = load(tmp_path)
    assert [(h["host"], h["status"]) for h in report["hosts"]] == [("gpu-d", "failed")], output
    assert "1 host: 0 LIVE, 1 failed, 0 unreachable" in markdown
    assert rc != 0


ROLLING = textwrap.dedent("""\
    - name: Rolling restart as site.yml runs it, one host at a time
      hosts: all
      gather_facts: false
      serial: 1
      tasks:
        - name: Gate
          ansible.builtin.import_role:
            name: glm53.tensorfold.fleet_report
            tasks_from: gate
          vars:
            fleet_report_gate_step: restart
            fleet_report_max_fail_percentage: 0
            fleet_report_count_stages: [restart]
        - name: Restart
          block:
            - name: Note that this host was restarted
              ansible.builtin.copy:
                content: "restarted\\n"
                dest: "{{ marker_dir }}/{{ inventory_hostname }}"
                mode: "0644"
            - name: Fail the restart where the inventory says so
              ansible.builtin.fail:
                msg: ["[E_START] {{ inventory_hostname }}: rank 1 exited with status 3. Read the rank log tails above."]
              when: fail_restart | default(false)
          rescue:
            - name: Record the failure
              ansible.builtin.import_role:
                name: glm53.tensorfold.fleet_report
                tasks_from: record_failure
              vars:
                fleet_report_stage: restart
            - name: Leave the run
              ansible.builtin.meta: end_host
    """) + REPORT_PLAY


def test_a_rolling_restart_stops_at_the_first_failed_host_and_the_report_says_why(tmp_path):
    markers = tmp_path / "restarted"
    markers.mkdir()
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          vars: {{ansible_connection: local, ansible_python_interpreter: {python}, marker_dir: {markers}}}
          hosts:
            gpu-a: {{}}
            gpu-b: {{fail_restart: true}}
            gpu-c: {{}}
            gpu-d: {{}}
        """).format(python=sys.executable, markers=markers))
    (tmp_path / "rolling.yml").write_text(ROLLING)
    rc, output = run_playbook(tmp_path / "rolling.yml", tmp_path / "hosts.yml", cwd=tmp_path)
    assert rc != 0
    # gpu-a went first and is back; gpu-b failed; gpu-c and gpu-d were never touched.
    assert sorted(p.name for p in markers.iterdir()) == ["gpu-a", "gpu-b"], output
    report = load(tmp_path)[0]
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-b"]["status"] == "failed" and lines["gpu-b"]["codes"] == ["E_START"]
    for host in ("gpu-c", "gpu-d"):
        assert lines[host]["status"] == "skipped"
        assert lines[host]["todo"].startswith("The run stopped before restart on this host: gpu-b failed")
    assert lines["gpu-a"]["status"] == "skipped" and "stopped" not in lines["gpu-a"]["todo"]
