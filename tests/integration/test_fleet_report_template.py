"""The fleet report's Markdown (roles/fleet_report/templates/fleet-report.md.j2), rendered by
Ansible's template lookup from reports that plugins/module_utils/fleet_report.py builds."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_report import build_report  # noqa: E402

TEMPLATE = os.path.join(ROOT, "roles", "fleet_report", "templates", "fleet-report.md.j2")
REVISION = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
TAG = "3f2a9c0d1e4b5a6978812345"


def live_facts(host, port=8020, tag=TAG):
    return {
        "gpu_host_checks_result": {"status": "warn", "problems": [{
            "code": "W_P2P", "severity": "warning", "host": host,
            "message": "[W_P2P] %s: NVML reports no peer-to-peer between the cards." % host}]},
        "tensorfold_image_ref": "glm53-tensorfold:" + tag, "tensorfold_image_tag": tag,
        "weights_fetch_model_revision": REVISION,
        "rank_container_result": {"status": "running", "endpoint": "http://127.0.0.1:%d" % port, "context": 262144,
                                  "streams": 4, "log_dir": "/srv/glm53/logs/current", "warnings": []},
        "smoke_test_result": {"status": "live", "endpoint": "http://%s:%d/v1" % (host, port), "reply": "Hello.",
                              "problems": []},
        "fleet_report_reached_end": True,
    }


def render(tmp_path, report):
    """Render the template the way the role does (lookup('template')) and return the text."""
    (tmp_path / "report.json").write_text(json.dumps({"fleet_report_result": report}))
    out = tmp_path / "out.md"
    playbook = tmp_path / "render.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.copy": {"content": "{{ lookup('ansible.builtin.template', '%s') }}" % TEMPLATE,
                                  "dest": str(out), "mode": "0644"}}]}]))
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
                    "-e", "@" + str(tmp_path / "report.json"), "-e", "ansible_python_interpreter=" + sys.executable,
                    str(playbook)], check=True, capture_output=True, text=True,
                   env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections")))
    return out.read_text()


def test_a_row_per_host_and_what_to_do_for_failed_ones(tmp_path):
    report = build_report({
        "gpu-a": live_facts("gpu-a"),
        "gpu-c": {"step_failure": {"stage": "gpu_host_checks", "task": "x",
                                   "message": "[E_GPU_MEMORY] gpu-c: GPU 0 has 10000 MiB free. Stop what holds the GPU's memory."}},
    }, generated_at="2026-11-29T11:00:00Z")
    text = render(tmp_path, report)
    assert text.startswith("# GLM-5.3-Flash fleet report\n\nRun finished 2026-11-29T11:00:00Z. 2 hosts: 1 LIVE, 1 failed, 0 unreachable.\n")
    assert "| gpu-a | LIVE | http://gpu-a:8020/v1 | 262144 | 4 | %s | %s | W_P2P |\n" % (TAG[:12], REVISION[:12]) in text
    assert "| gpu-c | failed (E_GPU_MEMORY) | - | - | - | - | - | - |\n" in text
    assert "\n## What to do\n\n- **gpu-c** (failed (E_GPU_MEMORY) in gpu_host_checks): [E_GPU_MEMORY] gpu-c: GPU 0 has 10000 MiB free." in text
    assert "\n## Warnings\n\n- **gpu-a**: [W_P2P] gpu-a:" in text
    assert "\n\n\n" not in text


def test_cells_escape_pipes_and_short_hashes_only(tmp_path):
    text = render(tmp_path, build_report({"h": live_facts("h", tag="a|b")}))
    assert "| a\\|b |" in text


def test_a_plan_says_nothing_changed_and_has_no_empty_sections(tmp_path):
    text = render(tmp_path, build_report({"h": {"fleet_report_reached_end": True,
                                                  "smoke_test_result": {"status": "planned"}}}, plan=True))
    assert "Plan only (tensorfold_plan or --check): nothing was changed on any host." in text
    assert "| h | planned (check mode) |" in text
    assert "## What to do" not in text and "## Warnings" not in text


def test_a_check_run_says_what_a_live_box_is_beside_the_planned_ones(tmp_path):
    # site.yml --check: a box the fast path found converged is LIVE (its record), another planned.
    planned = {"fleet_report_reached_end": True, "smoke_test_result": {"status": "planned"}}
    text = render(tmp_path, build_report({"gpu-a": live_facts("gpu-a"), "gpu-b": planned}, plan=True))
    assert ("Plan only (tensorfold_plan or --check): nothing was changed on any host. A LIVE box already serves what the run "
            "wants: a real run would leave it as it is.\n") in text
    assert "| gpu-a | LIVE |" in text and "| gpu-b | planned (check mode) |" in text
    assert "\n\n\n" not in text


def test_a_gateway_adds_its_url_and_a_column_and_a_bench_adds_its_section(tmp_path):
    url = "http://10.20.0.5:8020/v1"
    bench = {"status": "measured", "kind": "box", "url": "http://gpu-a:8020/v1",
             "cases": {"decode_1": {"per_stream": 240.0, "total": 240.0, "ttft_p50_ms": 50.0, "ttft_p99_ms": 60.0}}}
    facts = dict(live_facts("gpu-a"), gateway_state={"url": url, "gateway": "gw", "state": "down",
                                                     "detail": "DOWN, last check L7TOUT"},
                 fleet_bench_result=bench)
    report = build_report({"gpu-a": facts}, generated_at="2026-11-29T11:00:00Z")
    text = render(tmp_path, report)
    assert "\nGateway: %s (0 of 1 box up).\n- **gpu-a** at the gateway: down (DOWN, last check L7TOUT)\n" % url in text
    assert "| host | status | endpoint | gateway | context |" in text
    assert "| gpu-a | LIVE | http://gpu-a:8020/v1 | down | 262144 |" in text
    assert "\n## Measured speed\n" in text and text.index("## Measured speed") < text.index("## Warnings")
    assert "\n\n\n" not in text
