"""site.yml's composition, run for real: which steps each mode runs, in which order, per host.

The real site.yml, step guard, settings role and fleet report run against a copy of the
collection whose host-touching roles are recording stubs (stub_collection.py), on local hosts.
"""

import json
import os
import re
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import stub_collection  # noqa: E402
from ansible_run import run_playbook  # noqa: E402

# A full deploy: pre-flight (the fast path's comparison), the steps, the deploy record.
STEPS = ["gpu_host_checks", "nvidia_toolkit", "tensorfold_image", "weights_fetch", "rank_container", "smoke_test"]
DEPLOY = ["step:converged"] + STEPS + ["rank_container:deployed"]
# The image's pins an operator sets (their defaults are empty): a run that builds the image needs them.
PINS = {"tensorfold_image_engine_commit": "f350cd3e" + "0" * 32, "tensorfold_image_patch_series_commit": "e" * 40}
RESTART_PLAY = "Rolling restart, tensorfold_restart_serial hosts at a time (drain, restart, smoke test, undrain)"


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    return stub_collection.build(tmp_path_factory.mktemp("stub"))


def site(collection, tmp_path, hosts=("gpu-a", "gpu-b"), host_vars=None, args=(), playbook="site", groups=None):
    """Run glm53.tensorfold.<playbook> from the stub collection (``groups``: more inventory groups,
    {name: [hosts]}); return (rc, output, {host: [roles]})."""
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    children = {"gpu_hosts": {"hosts": dict((h, (host_vars or {}).get(h, {})) for h in hosts)}}
    children.update((name, {"hosts": dict((h, (host_vars or {}).get(h, {})) for h in members)})
                    for name, members in (groups or {}).items())
    inventory = {"all": {"vars": dict(PINS, ansible_connection="local", ansible_python_interpreter=sys.executable,
                                      stub_log_dir=str(logs)),
                         "children": children}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    rc, output = run_playbook("glm53.tensorfold.%s" % playbook, tmp_path / "hosts.yml", cwd=tmp_path,
                              extra_args=list(args), env={"ANSIBLE_COLLECTIONS_PATH": str(collection)})
    return rc, output, dict((h, stub_collection.ran(logs, h)) for h in hosts)


def roles(entries):
    return [role for role, _ in entries]


def test_a_deploy_runs_every_step_in_order_and_no_restart_or_stop(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path)
    assert rc == 0, output
    for host in ("gpu-a", "gpu-b"):
        assert roles(ran[host]) == DEPLOY, output
        assert ("rank_container", "start") in ran[host]
        assert ("gpu_host_checks", "True") in ran[host], "the toolkit step follows the host checks"


@pytest.mark.parametrize("how", [["--tags", "restart"], ["-e", "tensorfold_action=restart"]])
def test_restart_runs_only_the_ranks_and_the_smoke_test(collection, tmp_path, how):
    rc, output, ran = site(collection, tmp_path, args=how)
    assert rc == 0, output
    for host in ("gpu-a", "gpu-b"):
        assert ran[host][0] == ("rank_container", "restart") and roles(ran[host]) == ["rank_container", "smoke_test"], output


def test_restart_yml_is_the_restart_action(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, playbook="restart")
    assert rc == 0, output
    assert ran["gpu-a"][0] == ("rank_container", "restart") and roles(ran["gpu-a"]) == ["rank_container", "smoke_test"], output


def test_restarts_go_one_host_at_a_time(collection, tmp_path):
    rc, output, _ = site(collection, tmp_path, hosts=("gpu-a", "gpu-b", "gpu-c"), args=["--tags", "restart"])
    assert rc == 0, output
    # One batch per host: the restart play is printed once per batch.
    assert output.count("PLAY [" + RESTART_PLAY + "]") == 3, output


@pytest.fixture(scope="module")
def collection_with_gateway(tmp_path_factory):
    """The stub collection with the gateway stubbed too (its drain reaches HAProxy)."""
    return stub_collection.build(tmp_path_factory.mktemp("stub-gateway"),
                                 stubbed=stub_collection.STUBBED + ("gateway",))


@pytest.mark.parametrize("gateways", [[], ["gw-1"]])
def test_a_restart_drains_and_returns_the_box_at_the_gateway_only_where_there_is_one(collection_with_gateway,
                                                                                      tmp_path, gateways):
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=("gpu-a",), groups={"gateways": gateways},
                           args=["--tags", "restart"])
    assert rc == 0, output
    around = ["gateway:drain", "rank_container", "smoke_test", "gateway:undrain"]
    assert roles(ran["gpu-a"]) == (around if gateways else around[1:3]), output
    # Without a gateway the drain and the return cost the box no task, not even a skipped one.
    assert ("TASK [glm53.tensorfold.gateway" in output) == bool(gateways), output


@pytest.mark.parametrize("tags", [[], ["--tags", "start,smoke,gateway"]])
def test_a_deploy_replaces_a_pending_box_in_the_rolling_restart_and_only_it(collection, tmp_path, tags):
    # gpu-b's start left its changed container serving (a gateway is in front): the restart play
    # replaces it after the start and smoke steps, one host per batch; gpu-a is not restarted.
    pending = {"gpu-b": {"stub_facts": {"rank_container": {"rank_container_replace_pending": True}}}}
    rc, output, ran = site(collection, tmp_path, host_vars=pending, args=tags)
    assert rc == 0, output
    deploy = DEPLOY if not tags else ["rank_container", "smoke_test"]
    assert roles(ran["gpu-a"]) == deploy, output
    # Replaced, smoke-tested, and (in a full deploy) recorded for the next run's fast path.
    record = [] if tags else ["rank_container:deployed"]
    assert roles(ran["gpu-b"]) == deploy + ["rank_container", "smoke_test"] + record, output
    assert ran["gpu-b"][len(deploy)] == ("rank_container", "restart"), output
    # Only gpu-b is in the restart play: one batch.
    assert output.count("PLAY [" + RESTART_PLAY + "]") == 1, output


def test_a_deploy_with_nothing_pending_leaves_the_restart_play_without_hosts(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a", "gpu-b", "gpu-c"))
    assert rc == 0, output
    assert all(("rank_container", "restart") not in ran[host] for host in ("gpu-a", "gpu-b", "gpu-c")), output
    assert output.count("PLAY [" + RESTART_PLAY + "]") == 1, output


@pytest.mark.parametrize("how", [["--tags", "stop"], ["-e", "tensorfold_action=stop"]])
def test_stop_runs_only_the_stop(collection, tmp_path, how):
    rc, output, ran = site(collection, tmp_path, args=how)
    assert rc == 0, output
    assert ran["gpu-a"] == [("rank_container", "stop")], output


def test_stop_yml_is_the_stop_action(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, playbook="stop")
    assert rc == 0, output
    assert ran["gpu-a"] == [("rank_container", "stop")], output


def test_the_plan_runs_the_read_only_checks_and_the_plan_only(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, args=["-e", "tensorfold_plan=true"])
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == ["gpu_host_checks", "fleet_plan"], output
    assert ("gpu_host_checks", "False") in ran["gpu-a"], "no toolkit step follows in a plan run"


# A box that goes the normal way in check mode: every step (in check mode) and the plan, no deploy record.
CHECK_STEPS = STEPS[:4] + ["fleet_plan"] + STEPS[4:]
# A box that goes the normal way in --check: the fast path's read, every step in check mode, and the
# deploy record's entry, whose task writes nothing in check mode (molecule fleet's verify holds the
# records untouched).
CHECK_RUN = ["step:converged"] + CHECK_STEPS + ["rank_container:deployed"]


def test_check_mode_runs_every_deploy_step_and_the_plan(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, args=["--check"])
    assert rc == 0, output
    # The fast path's read, then (no box converged) every step runs in check mode.
    assert roles(ran["gpu-a"]) == CHECK_RUN, output
    assert ("gpu_host_checks", "True") in ran["gpu-a"], "the toolkit step follows, in check mode too"


LIVE_B = {"status": "live", "endpoint": "http://gpu-b:8020/v1", "problems": []}


@pytest.mark.parametrize("differs", [[], ["gpu-a"]])
def test_check_mode_takes_the_fast_path_a_converged_box_is_live_and_plans_nothing(collection, tmp_path, differs):
    # gpu-b is converged; gpu-a is too, or differs (no answer of the read says it is converged).
    converged = {"stub_facts": {"step": {"step_converged_info": {"converged": True, "published": {"smoke_test_result": LIVE_B}}}}}
    host_vars = dict((h, converged) for h in ("gpu-a", "gpu-b") if h not in differs)
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars, args=["--check"])
    assert rc == 0, output
    assert roles(ran["gpu-b"]) == ["step:converged"], output  # its one read: no step, no plan, no record
    assert roles(ran["gpu-a"]) == (CHECK_RUN if differs else ["step:converged"]), output
    lines = report_lines(tmp_path)
    # As in a no-op run: LIVE from its record, not planned; a box that would be deployed is planned.
    assert (lines["gpu-b"]["status"], lines["gpu-b"]["endpoint"]) == ("live", "http://gpu-b:8020/v1"), lines
    assert lines["gpu-a"]["status"] == ("planned" if differs else "live"), lines


@pytest.mark.parametrize("args", [["--check", "-e", "tensorfold_fast_path=false"], ["--check", "-e", "tensorfold_plan=true"],
                                  ["-e", "tensorfold_plan=true"]])
def test_the_whole_dry_run_of_a_converged_box_with_the_fast_path_off_or_the_plan(collection, tmp_path, args):
    converged = {"stub_facts": {"step": {"step_converged_info": {"converged": True, "published": {}}}}}
    rc, output, ran = site(collection, tmp_path, host_vars={"gpu-a": converged}, args=args)
    assert rc == 0, output
    # No read: the box is not known converged and gets every check-mode step, or the plan's checks and plan.
    assert roles(ran["gpu-a"]) == (CHECK_STEPS if "tensorfold_fast_path=false" in args else ["gpu_host_checks", "fleet_plan"]), output


def test_in_check_mode_a_converged_box_lends_what_the_box_being_checked_lacks(collection, tmp_path):
    # The lender joins the image and weights steps as in a real run (they serve nothing in check mode).
    host_vars = {"gpu-a": {"stub_facts": {"step": {"step_converged_info": {"converged": True, "published": {}}}}},
                 "gpu-b": {"stub_facts": {"step": {"step_converged_info": {"converged": False, "lacks": ["image", "weights"]}}}}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars, args=["--check"])
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == ["step:converged", "tensorfold_image", "weights_fetch"], output
    assert roles(ran["gpu-b"]) == CHECK_RUN, output


def plays_without_hosts(output):
    """The names of the plays Ansible said matched no host."""
    names = re.findall(r"^PLAY \[(.*)\] \**\nskipping: no hosts matched", output, re.M)
    return set(names)


def test_a_tag_runs_its_step_only(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, args=["--tags", "smoke"])
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == ["smoke_test"], output
    # The deploy plays that --tags smoke selects nothing in take no box (each would cost every box
    # its always-tagged tasks); the smoke play takes both.
    idle = plays_without_hosts(output)
    for play in ("The air-gapped bundle", "NVIDIA Container Toolkit", "The engine image", "The weights", "Both ranks in one"):
        assert any(name.startswith(play) for name in idle), (play, output)
    assert not any(name.startswith("Smoke test") for name in idle), output


def test_a_tag_of_a_roles_task_takes_the_boxes_into_its_play(collection, tmp_path):
    # --tags check selects the toolkit role's checks (tagged check) in the toolkit play, not its install.
    rc, output, ran = site(collection, tmp_path, args=["--tags", "check"])
    assert rc == 0, output
    idle = plays_without_hosts(output)
    assert not any(name.startswith("NVIDIA Container Toolkit") for name in idle), output
    assert any(name.startswith("Both ranks in one") for name in idle), output


@pytest.fixture(scope="module")
def collection_with_bench(tmp_path_factory):
    """The stub collection with the bench and monitoring stubbed too (they reach boxes and Prometheus)."""
    return stub_collection.build(tmp_path_factory.mktemp("stub-bench"),
                                 stubbed=stub_collection.STUBBED + ("fleet_bench", "monitoring"))


def test_monitoring_runs_after_the_bench_so_it_reads_this_runs_figures(collection_with_bench, tmp_path):
    # gpu-a is also the Prometheus host: its log holds the bench, the node exporter and Prometheus in run order.
    rc, output, ran = site(collection_with_bench, tmp_path, hosts=("gpu-a",), groups={"monitoring": ["gpu-a"]},
                           args=["--tags", "bench,monitoring"])
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == ["fleet_bench", "monitoring:node_exporter", "monitoring"], output


def bench_facts(status, per_stream):
    """A box's stub facts: its smoke test passes and it publishes a bench result (as fleet_bench would)."""
    return {"stub_facts": {"smoke_test": {
        "smoke_test_result": {"status": "live", "endpoint": "http://127.0.0.1:8020/v1", "problems": []},
        "fleet_bench_result": {"kind": "box", "status": status, "url": "http://127.0.0.1:8020",
                               "cases": {"decode_4": {"per_stream": per_stream, "total": per_stream * 4}}}}}}


def baselines(tmp_path):
    path = tmp_path / "reports" / "bench-baselines.json"
    return json.loads(path.read_text())["hosts"] if path.exists() else None


def test_each_box_keeps_its_last_real_bench_across_runs_that_measure_nothing(collection, tmp_path):
    # The first run measures gpu-a only: the baselines file holds its figures.
    rc, output, _ = site(collection, tmp_path, host_vars={"gpu-a": bench_facts("measured", 100.0)}, args=["--tags", "smoke"])
    assert rc == 0, output
    assert sorted(baselines(tmp_path)) == ["gpu-a"]
    assert baselines(tmp_path)["gpu-a"]["cases"]["decode_4"]["per_stream"] == 100.0
    first = baselines(tmp_path)["gpu-a"]
    # A run without the bench: the report has no bench, the baselines stay.
    rc, output, _ = site(collection, tmp_path, args=["--tags", "smoke"])
    assert rc == 0, output
    assert "bench" not in json.loads((tmp_path / "reports" / "fleet-report.json").read_text())
    assert baselines(tmp_path) == {"gpu-a": first}
    # A check-mode bench (planned, figures made up) changes nothing; a later real one on gpu-b adds it.
    rc, output, _ = site(collection, tmp_path, host_vars={"gpu-a": bench_facts("planned", 1.0)}, args=["--check", "--tags", "smoke"])
    assert rc == 0, output
    assert baselines(tmp_path) == {"gpu-a": first}
    rc, output, _ = site(collection, tmp_path, host_vars={"gpu-b": bench_facts("measured", 80.0)}, args=["--tags", "smoke"])
    assert rc == 0, output
    assert baselines(tmp_path)["gpu-a"] == first
    assert baselines(tmp_path)["gpu-b"]["cases"]["decode_4"]["per_stream"] == 80.0


@pytest.mark.parametrize("args, follows", [
    # A full deploy, --check and a plan run: asserted in the tests of those runs above.
    (["--tags", "check,toolkit"], "True"),
    (["--tags", "check,nvidia_toolkit,start"], "True"),
    (["--tags", "check"], "False"),  # the toolkit play's checks run, its install does not
    (["--tags", "gpu_host_checks"], "False"),
    (["--skip-tags", "toolkit"], "False"),
])
def test_the_host_checks_know_whether_the_toolkit_step_follows_for_the_box(collection, tmp_path, args, follows):
    rc, output, ran = site(collection, tmp_path, args=args)
    assert rc == 0, output
    assert ("gpu_host_checks", follows) in ran["gpu-a"], (ran["gpu-a"], output)


def test_the_toolkit_step_requires_the_runtime_where_the_host_checks_left_it_to_the_step(collection, tmp_path):
    left = {"status": "warn", "problems": [], "left_to_toolkit": [{"code": "E_NVIDIA_RUNTIME", "message": "m"}]}
    host_vars = {"gpu-b": {"stub_facts": {"gpu_host_checks": {"gpu_host_checks_result": left}}}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars)
    assert rc == 0, output
    assert ("nvidia_toolkit", "False") in ran["gpu-a"] and ("nvidia_toolkit", "True") in ran["gpu-b"], (ran, output)


def test_the_image_tag_checks_the_image_pins_in_pre_flight(collection, tmp_path):
    host_vars = {"gpu-b": {"tensorfold_image_engine_commit": "f350cd3e"}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars, args=["--tags", "image"])
    assert rc != 0
    assert roles(ran["gpu-a"]) == ["tensorfold_image"] and ran["gpu-b"] == [], output
    assert re.search(r"\[E_SETTINGS\] gpu-b: tensorfold_image_engine_commit must be the full\s+40-hex", output), output
    assert "gpu-b failed in pre-flight" in output


def test_a_failed_host_leaves_the_run_and_the_others_go_on(collection, tmp_path):
    host_vars = {"gpu-b": {"stub_fail": {"weights_fetch": "[E_HF_TOKEN] gpu-b: the Hub refused the token. Set it."}}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars)
    assert rc != 0
    assert roles(ran["gpu-a"]) == DEPLOY, output
    assert roles(ran["gpu-b"]) == DEPLOY[:DEPLOY.index("weights_fetch") + 1], output
    assert "gpu-b failed in weights_fetch: see its line in the fleet report" in output
    report = json.loads((tmp_path / "reports" / "fleet-report.json").read_text())
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-b"]["status"] == "failed" and lines["gpu-b"]["codes"] == ["E_HF_TOKEN"], lines


def test_past_the_fail_percentage_the_run_takes_no_more_hosts(collection, tmp_path):
    host_vars = {"gpu-a": {"stub_fail": {"gpu_host_checks": "[E_GPU_BUSY] gpu-a: GPU 1 is busy. Stop it."}},
                 "gpu-b": {}, "gpu-c": {}}
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a", "gpu-b", "gpu-c"), host_vars=host_vars,
                           args=["-e", "tensorfold_max_fail_percentage=20"])
    assert rc != 0
    # The checks ran everywhere (one play); past 20% failed, nothing after them runs.
    for host in ("gpu-b", "gpu-c"):
        assert roles(ran[host]) == DEPLOY[:DEPLOY.index("gpu_host_checks") + 1], output
    report = json.loads((tmp_path / "reports" / "fleet-report.json").read_text())
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-b"]["todo"].startswith("The run stopped before bundle on this host: gpu-a failed")


def test_a_check_that_fails_in_a_play_tagged_otherwise_is_recorded_and_its_host_leaves(collection, tmp_path):
    # --tags check selects the toolkit's checks in a play tagged toolkit: the step's rescue must run
    # there too, or the failure ends the run with no fleet report and no record of why.
    host_vars = {"gpu-b": {"stub_fail": {"nvidia_toolkit": "[E_DOCKER] gpu-b: docker info failed: no daemon. Start it."}}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars, args=["--tags", "check"])
    assert rc != 0
    assert roles(ran["gpu-b"]) == ["gpu_host_checks", "nvidia_toolkit"], output
    assert re.search(r"gpu-b leaves\s+the\s+run:\s+nvidia_toolkit\s+failed", output), output
    report = json.loads((tmp_path / "reports" / "fleet-report.json").read_text())
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-b"]["status"] == "failed" and lines["gpu-b"]["codes"] == ["E_DOCKER"], lines
    assert lines["gpu-b"]["stage"] == "nvidia_toolkit"


def test_settings_that_fail_pre_flight_leave_the_host_out_of_every_step(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, host_vars={"gpu-b": {"tensorfold_parallel": 0}})
    assert rc != 0
    assert ran["gpu-b"] == [], output
    assert roles(ran["gpu-a"]) == DEPLOY
    assert re.search(r"gpu-b leaves\s+the\s+run:\s+pre-flight\s+failed", output), output
    assert "gpu-b failed in pre-flight" in output


def test_the_pre_flight_image_check_runs_only_when_the_image_step_does(collection, tmp_path):
    # No engine commit: a run that builds no image does not need one, a full deploy does.
    unpinned = {"gpu-a": {"tensorfold_image_engine_commit": ""}}
    for number, args in enumerate((["--tags", "weights"], ["--tags", "restart"], ["-e", "tensorfold_action=stop"],
                                   ["--skip-tags", "build"], [])):
        work = tmp_path / str(number)
        work.mkdir()
        rc, output, ran = site(collection, work, host_vars=unpinned, args=args)
        refused = "[E_SETTINGS] gpu-a: tensorfold_image_engine_commit" in output
        assert (rc != 0, refused) == ((True, True) if not args else (False, False)), (args, output)
        assert roles(ran["gpu-b"]) != [], (args, output)


def test_a_converged_box_skips_every_deploy_step_and_the_others_deploy(collection, tmp_path):
    live = {"status": "live", "endpoint": "http://gpu-b:8020/v1", "problems": []}
    stands_for = {"converged": True, "published": {"smoke_test_result": live}}
    host_vars = {"gpu-b": {"stub_facts": {"step": {"step_converged_info": stands_for}}}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars)
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == DEPLOY, output
    assert roles(ran["gpu-b"]) == ["step:converged"], output
    report = json.loads((tmp_path / "reports" / "fleet-report.json").read_text())
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-b"]["status"] == "live" and lines["gpu-b"]["endpoint"] == "http://gpu-b:8020/v1", lines


@pytest.mark.parametrize("lacks, named, lends", [
    (["image", "weights"], {}, ["tensorfold_image", "weights_fetch"]),  # a new box
    (["weights"], {}, ["weights_fetch"]),
    ([], {}, []),  # another setting: the box has a good image and good weights
    ([], {"tensorfold_image_build_host": "gpu-a"}, ["tensorfold_image"]),  # the named build host is expected in the play
])
def test_a_converged_box_lends_only_what_the_deployed_box_lacks(collection, tmp_path, lacks, named, lends):
    converged = {"converged": True, "published": {}}
    host_vars = {"gpu-a": dict(named, stub_facts={"step": {"step_converged_info": converged}}),
                 "gpu-b": dict(named, stub_facts={"step": {"step_converged_info": {
                     "converged": False, "lacks": lacks}}}),
                 "gpu-c": {"stub_facts": {"step": {"step_converged_info": converged}}}}
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a", "gpu-b", "gpu-c"), host_vars=host_vars)
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == ["step:converged"] + lends, output
    assert roles(ran["gpu-b"]) == DEPLOY, output
    assert roles(ran["gpu-c"]) == ["step:converged"], output  # one lender


def test_a_converged_fleet_skips_the_deploy_plays_without_a_warning(collection, tmp_path):
    converged = {"stub_facts": {"step": {"step_converged_info": {"converged": True, "published": {}}}}}
    rc, output, ran = site(collection, tmp_path, host_vars={"gpu-a": converged, "gpu-b": converged})
    assert rc == 0, output
    for host in ("gpu-a", "gpu-b"):
        assert roles(ran[host]) == ["step:converged"], output
    assert "[WARNING]" not in output, output
    assert "PLAY [Both ranks in one container (left alone when nothing changed)]" in output


@pytest.fixture(scope="module")
def collection_with_services(tmp_path_factory):
    """The stub collection with the gateway and monitoring stubbed too: their main entries note
    whether site.yml gave them their fast path."""
    return stub_collection.build(tmp_path_factory.mktemp("stub-services"),
                                 stubbed=stub_collection.STUBBED + ("gateway", "monitoring"))


@pytest.mark.parametrize("args, fast", [([], "True"), (["--check"], "True"), (["--check", "-e", "tensorfold_fast_path=false"], "False"),
                                        (["--tags", "gateway,monitoring"], "False")])
def test_the_gateway_and_prometheus_take_their_fast_path_in_a_full_run_and_its_check(collection_with_services, tmp_path,
                                                                                        args, fast):
    rc, output, ran = site(collection_with_services, tmp_path, hosts=("gpu-a",), groups={"gateways": ["gw-1"], "monitoring": ["mon-1"]},
                           args=args)
    assert rc == 0, output
    logs = dict((h, stub_collection.ran(tmp_path / "logs", h)) for h in ("gw-1", "mon-1"))
    assert ("gateway", fast) in logs["gw-1"] and ("monitoring", fast) in logs["mon-1"], (logs, output)


@pytest.mark.parametrize("args", [["-e", "tensorfold_fast_path=false"], ["--tags", "all"]])
def test_the_fast_path_only_in_a_full_deploy_run_that_allows_it(collection, tmp_path, args):
    rc, output, ran = site(collection, tmp_path, args=args)
    assert rc == 0, output
    fast = "--tags" in args  # --tags all is a full run
    expected = DEPLOY if fast else STEPS
    assert roles(ran["gpu-a"]) == expected, output


def _step_entries():
    """Every glm53.tensorfold.step entry of the collection's playbooks (play roles), with its file and play."""
    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for name in sorted(os.listdir(os.path.join(root, "playbooks"))):
        with open(os.path.join(root, "playbooks", name)) as handle:
            for play in yaml.safe_load(handle) or []:
                for entry in play.get("roles") or []:
                    if isinstance(entry, dict) and entry.get("role") == "glm53.tensorfold.step":
                        yield name, play, entry


def test_the_step_knows_the_tags_of_the_plays_it_prepares_for():
    """Pre-flight's bundle and image checks and the host checks' toolkit rule read the bundle, toolkit
    and image plays' tags from the step's vars (step_play_tags): they must be the plays' own."""
    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "roles", "step", "vars", "main.yml")) as handle:
        known = yaml.safe_load(handle)["step_play_tags"]
    tags = dict((entry["step_roles"][0]["role"], play["tags"]) for playbook, play, entry in _step_entries()
                if playbook == "site.yml" and entry.get("step_roles"))
    assert sorted(tags["glm53.tensorfold.bundle"]) == sorted(known["bundle"])
    assert sorted(tags["glm53.tensorfold.nvidia_toolkit"]) == sorted(known["toolkit"])
    assert sorted(tags["glm53.tensorfold.tensorfold_image"]) == sorted(known["image"])
    assert sorted(tags["glm53.tensorfold.weights_fetch"]) == sorted(known["weights"])
    assert sorted(tags["glm53.tensorfold.smoke_test"]) == sorted(known["smoke"])
    start = [play["tags"] for playbook, play, _ in _step_entries() if play["name"].startswith("Both ranks in one container")]
    assert start == [known["start"]]


def test_every_step_entry_of_the_playbooks_matches_the_step_roles_specification():
    """The step role's entry point is `guard`, which Ansible does not check by itself in every play:
    this checks what the playbooks pass, templated values left to the run."""
    import yaml
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "roles", "step", "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["guard"]["options"]
    validator = ArgumentSpecValidator(spec)
    entries = list(_step_entries())
    assert len(entries) >= 14
    for playbook, play, entry in entries:
        params = dict((key, value) for key, value in entry.items()
                      if key not in ("role", "vars", "tags", "when") and not (isinstance(value, str) and "{{" in value))
        result = validator.validate(params)
        assert not result.error_messages, (playbook, play.get("name"), result.error_messages)


def test_the_step_specification_catches_an_unknown_key_of_an_entry():
    import yaml
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "roles", "step", "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["guard"]["options"]
    result = ArgumentSpecValidator(spec).validate({"step_roles": [{"role": "x", "only_when": ["image"]}]})
    assert result.error_messages


def test_boxes_that_disagree_on_the_plan_fail_pre_flight_and_nothing_deploys(collection, tmp_path):
    rc, output, ran = site(collection, tmp_path, host_vars={"gpu-b": {"tensorfold_plan": True}})
    assert rc != 0, output
    assert "[E_SETTINGS] gpu-a: tensorfold_plan is False here but not on gpu-b" in output, output
    for host in ("gpu-a", "gpu-b"):  # pre-flight's own entries only: no check, no deploy step, no plan
        assert not set(roles(ran[host])) & set(STEPS + ["fleet_plan"]), output


def test_a_batch_size_set_in_the_inventory_is_named_once_as_unused(collection, tmp_path):
    in_inventory = {"gpu-a": {"tensorfold_serial": 1}, "gpu-b": {"tensorfold_serial": 1}}
    rc, output, ran = site(collection, tmp_path, host_vars=in_inventory)
    assert rc == 0, output
    warning = "[W_SERIAL] inventory: tensorfold_serial is 1 there, but the plays take 100%"
    assert output.count(warning) == 1, output
    assert roles(ran["gpu-a"]) == DEPLOY, output  # a warning, not a stop
    rc, output, _ = site(collection, tmp_path, host_vars=in_inventory, args=["-e", "tensorfold_serial=1"])
    assert rc == 0 and "W_SERIAL" not in output, output


def test_heal_reads_every_hosts_settings_before_it_restarts_a_box(collection, tmp_path):
    # Port 1: nothing answers, so heal finds each box unhealthy and would restart it.
    base = {"tensorfold_port": 1}
    host_vars = {"gpu-a": base, "gpu-b": base, "gpu-c": dict(base, tensorfold_parallel=0)}
    hosts = ("gpu-a", "gpu-b", "gpu-c")
    work = tmp_path
    # gpu-c's bad setting is read before gpu-a is drained; like the rolling restart, heal counts
    # only failed heals against its fail percentage, so the others are healed.
    rc, output, ran = site(collection, work, hosts=hosts, host_vars=host_vars, playbook="heal")
    assert rc != 0
    assert ran["gpu-a"] == ran["gpu-b"] == [("rank_container", "restart"), ("smoke_test", "restart")], output
    assert ran["gpu-c"] == [], output
    report = json.loads((work / "reports" / "fleet-report.json").read_text())
    lines = dict((line["host"], line) for line in report["hosts"])
    assert lines["gpu-c"]["stage"] == "pre-flight" and lines["gpu-c"]["codes"] == ["E_SETTINGS"], lines


def test_pre_flight_refuses_what_used_to_fail_only_after_host_steps(collection, tmp_path):
    # A host fact no play has gathered yet, a null key, a bundle setting and a port clash: each passed
    # pre-flight once and failed (uncoded) later or never got checked.
    rc, output, ran = site(collection, tmp_path, host_vars={"gpu-b": {
        "tensorfold_data_dir": "/srv/{{ ansible_hostname }}", "tensorfold_api_key": None, "bundle_tarball": "maybe",
        "weights_fetch_peer_port": 8020, "tensorfold_image_strategy": "once"}})
    assert rc != 0
    assert ran["gpu-b"] == [], output
    assert roles(ran["gpu-a"]) == DEPLOY
    flat = " ".join(output.replace("''", "'").split())
    for text in ("[E_SETTINGS] gpu-b: tensorfold_data_dir could not be templated ('ansible_hostname' is undefined)",
                 "[E_SETTINGS] gpu-b: tensorfold_api_key is null",
                 "[E_SETTINGS] gpu-b: bundle_tarball is 'maybe'",
                 "[E_SETTINGS] gpu-b: weights_fetch_peer_port is 8020, which is also tensorfold_port",
                 "[W_SETTINGS] gpu-b: tensorfold_image_strategy is not a setting"):
        assert text in flat, text


def test_a_setting_may_name_another_setting_left_at_its_default(collection_with_gateway, tmp_path):
    # The demo's gateway URL names gateway_port, a default of the gateway role, which pre-flight's
    # play has not loaded: pre-flight read it as undefined and took the gateway out of the run.
    url = "http://{{ inventory_hostname }}:{{ gateway_port }}/v1"
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=("gpu-a",), groups={"gateways": ["gw-1"]},
                           host_vars={"gw-1": {"gateway_public_url": url},
                                      "gpu-a": {"tensorfold_data_dir": "/srv/tf-{{ gateway_port }}"}})
    assert rc == 0, output
    assert "could not be templated" not in output, output
    assert roles(ran["gpu-a"]) == DEPLOY[:-1] + ["gateway:readmit", "rank_container:deployed"], output
    assert report_lines(tmp_path).get("gw-1", {}).get("status") != "failed", output


# A host Ansible cannot reach: ssh to a port nothing listens on.
UNREACHABLE = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
               "ansible_ssh_common_args": "-o ConnectTimeout=3"}


def report_lines(work):
    report = json.loads((work / "reports" / "fleet-report.json").read_text())
    return dict((line["host"], line) for line in report["hosts"])


@pytest.mark.parametrize("max_fail, last", [(None, "skipped"), ("50", "restarted")])
def test_an_unreachable_box_in_a_rolling_restart_is_recorded_and_the_run_goes_on(collection_with_gateway, tmp_path,
                                                                                   max_fail, last):
    # One box per batch: Ansible ends the playbook when a batch's every host is unreachable. The
    # step records the box instead (E_UNREACHABLE), before its drain, and the fail percentage decides.
    args = ["--tags", "restart"] + (["-e", "tensorfold_restart_max_fail_percentage=" + max_fail] if max_fail else [])
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=("gpu-a", "gpu-b", "gpu-c"),
                           host_vars={"gpu-b": UNREACHABLE}, groups={"gateways": ["gw-1"]}, args=args)
    assert rc != 0 and "PLAY [Fleet report" in output, output
    assert roles(ran["gpu-a"]) == ["gateway:drain", "rank_container", "smoke_test", "gateway:undrain"], output
    assert ran["gpu-b"] == [], output
    assert roles(ran["gpu-c"]) == ([] if last == "skipped" else roles(ran["gpu-a"])), output
    lines = report_lines(tmp_path)
    assert (lines["gpu-b"]["status"], lines["gpu-b"]["stage"]) == ("unreachable", "restart"), lines
    assert lines["gpu-c"]["status"] == "skipped", lines
    assert "gpu-b failed in restart" in output


def test_a_gateway_the_drain_cannot_reach_fails_the_box_before_its_restart(collection, tmp_path):
    # The real drain (gateway not stubbed), delegated to a gateway Ansible cannot reach.
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a", "gpu-b"), groups={"gateways": ["gw-1"]},
                           host_vars={"gw-1": UNREACHABLE},
                           args=["--tags", "restart", "-e", "tensorfold_restart_max_fail_percentage=50"])
    assert rc != 0 and "PLAY [Fleet report" in output, output
    assert ran["gpu-a"] == [], output
    lines = report_lines(tmp_path)
    assert lines["gpu-a"]["codes"] == ["E_GATEWAY"] and lines["gpu-a"]["stage"] == "restart", lines
    assert "gw-1 cannot be reached, so it is not drained there" in " ".join(lines["gpu-a"]["errors"]), lines
    # The rescue's read of the box at the gateway is its state there: not known; the URL from the
    # gateway's inventory (no gateway play in this run).
    gateway = lines["gpu-a"]["gateway"]
    assert (gateway["state"], gateway["url"]) == ("unknown", "http://127.0.0.1:8020/v1"), gateway
    assert gateway["detail"].startswith("gw-1 could not be asked: "), gateway


@pytest.mark.parametrize("limit", ["gpu-a", "@limit.txt"])
def test_the_fleet_report_covers_the_hosts_of_the_limit_in_any_form(collection, tmp_path, limit):
    (tmp_path / "limit.txt").write_text("gpu-a\n")
    rc, output, ran = site(collection, tmp_path, args=["--tags", "restart", "--limit", limit])
    assert rc == 0, output
    assert list(report_lines(tmp_path)) == ["gpu-a"], output


def heal_summary(output):
    """heal.yml's summary lines: {box: what heal did}."""
    task = output[output.index("TASK [Say what heal did"):]
    return dict(re.findall(r"^\s*heal: (gpu-[\w-]+): (.*?)\s*$", task[:task.index("TASK [", 1)], re.M))


def test_heal_stops_at_the_first_failed_box_as_the_rolling_restart_does(collection_with_gateway, tmp_path):
    hosts = ("gpu-a", "gpu-b", "gpu-c")
    host_vars = dict((h, {"stub_fail": {"gateway:heal": "[E_SMOKE] %s: no answer. Read rank0.log." % h}}) for h in hosts)
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=hosts, host_vars=host_vars, playbook="heal",
                           groups={"gateways": ["gw-1"]})
    assert rc != 0
    # The failed heal's rescue returns the box to the gateways where its engine answers (readmit).
    assert roles(ran["gpu-a"]) == ["gateway:heal", "gateway:readmit"] and ran["gpu-b"] == ran["gpu-c"] == [], output
    lines = report_lines(tmp_path)
    assert lines["gpu-b"]["todo"].startswith("The run stopped before heal on this host: gpu-a failed"), lines
    summary = heal_summary(output)
    assert summary["gpu-a"] == "failed, see the report" and summary["gpu-c"].startswith("not looked at"), output


@pytest.fixture
def engine_port():
    """A stand-in for a healthy engine's API: every chat completion gets HTTP 200."""
    import http.server
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b'{"choices": [{"message": {"content": "ok"}}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_heal_in_check_mode_asks_each_box_and_leaves_a_healthy_one_alone(collection, tmp_path, engine_port):
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a",), host_vars={"gpu-a": {"tensorfold_port": engine_port}},
                           playbook="heal", args=["--check"])
    assert rc == 0, output
    assert ran["gpu-a"] == [] and heal_summary(output) == {"gpu-a": "healthy, left alone"}, output
    # Its completion answered in this run: LIVE in the report, not "not smoke-tested".
    line = report_lines(tmp_path)["gpu-a"]
    assert (line["status"], line["endpoint"]) == ("live", "http://gpu-a:%d/v1" % engine_port), line


def test_heal_says_what_it_did_on_the_boxes_of_its_run_only(collection, tmp_path):
    never = {"stub_facts": {"rank_container": {"rank_container_result": {"status": "not_deployed"}}}}
    host_vars = {"gpu-a": dict(never, tensorfold_port=1), "gpu-b": {"tensorfold_port": 1}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars, playbook="heal", args=["--limit", "gpu-a"])
    assert rc == 0, output
    assert heal_summary(output) == {"gpu-a": "never deployed, nothing to restart (run site.yml)"}, output


@pytest.mark.parametrize("tags", ["stop", "restart", "smoke"])
def test_check_mode_of_a_run_that_does_not_deploy_prints_no_deploy_plan(collection, tmp_path, tags):
    rc, output, ran = site(collection, tmp_path, args=["--tags", tags, "--check"])
    assert rc == 0, output
    assert "fleet_plan" not in roles(ran["gpu-a"]), output


def test_a_failed_restart_returns_the_box_to_the_gateways_before_it_leaves(collection_with_gateway, tmp_path):
    host_vars = {"gpu-a": {"stub_fail": {"rank_container": "[E_LOCK] gpu-a: another start holds the lock. Wait."}}}
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=("gpu-a",), host_vars=host_vars,
                           groups={"gateways": ["gw-1"]}, args=["--tags", "restart"])
    assert rc != 0 and "PLAY [Fleet report" in output, output
    assert roles(ran["gpu-a"]) == ["gateway:drain", "rank_container", "gateway:readmit"], output


def test_a_deploy_returns_a_smoke_tested_box_that_an_earlier_run_left_drained(collection_with_gateway, tmp_path):
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=("gpu-a",), groups={"gateways": ["gw-1"]},
                           args=["--tags", "smoke"])
    assert rc == 0, output
    assert roles(ran["gpu-a"]) == ["smoke_test", "gateway:readmit"], output


def fake_haproxy(servers):
    """The unit tests' stand-in for HAProxy's runtime API (tests/unit/plugins/modules), on a short socket path."""
    import importlib.util
    import tempfile
    from ansible_run import ROOT
    sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
    spec = importlib.util.spec_from_file_location(
        "gateway_server_tests", os.path.join(ROOT, "tests", "unit", "plugins", "modules", "test_gateway_server.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fake = module.FakeHAProxy(os.path.join(tempfile.mkdtemp(prefix="hap"), "admin.sock"), servers)
    fake.start()
    return fake


@pytest.mark.parametrize("answers", [True, False])
def test_a_failed_restart_puts_the_box_back_only_if_its_engine_answers(collection, tmp_path, engine_port, answers):
    # The real drain and return against a stand-in HAProxy; the restart itself fails (a stub).
    fake = fake_haproxy({"gpu-a": {"status": "UP", "scur": 0}})
    gateway = {"gateway_runtime_socket": fake.path, "gateway_state_file": str(tmp_path / "server-state")}
    box = {"tensorfold_port": engine_port if answers else 1,
           "stub_fail": {"rank_container": "[E_LOCK] gpu-a: another start holds the lock. Wait and run again."}}
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a",), host_vars={"gpu-a": box, "gw-1": gateway},
                           groups={"gateways": ["gw-1"]}, args=["--tags", "restart"])
    assert rc != 0 and "PLAY [Fleet report" in output, output
    assert "set server engines/gpu-a state maint" in fake.commands, fake.commands
    assert fake.servers["gpu-a"]["status"] == ("UP" if answers else "MAINT"), output
    line = report_lines(tmp_path)["gpu-a"]
    assert line["codes"] == ["E_LOCK"], line
    drained = [w for w in line["warnings"] if w.startswith("[W_GATEWAY] gpu-a: left drained at gw-1: its engine does not answer")]
    assert len(drained) == (0 if answers else 1), line
    assert ("gpu-a: put back in rotation at gw-1" in output) == answers, output


def test_a_deploy_puts_a_box_left_in_maintenance_back_once_its_smoke_test_passed(collection, tmp_path, engine_port):
    fake = fake_haproxy({"gpu-a": {"status": "MAINT", "scur": 0}})
    gateway = {"gateway_runtime_socket": fake.path, "gateway_state_file": str(tmp_path / "server-state")}
    rc, output, ran = site(collection, tmp_path, hosts=("gpu-a",), groups={"gateways": ["gw-1"]},
                           host_vars={"gpu-a": {"tensorfold_port": engine_port}, "gw-1": gateway}, args=["--tags", "smoke"])
    assert rc == 0, output
    assert fake.servers["gpu-a"]["status"] == "UP" and "gpu-a: put back in rotation at gw-1" in output, output


@pytest.mark.parametrize("gateways", [[], ["gw-1"]])
def test_a_stop_drains_the_box_at_the_gateways_first(collection_with_gateway, tmp_path, gateways):
    rc, output, ran = site(collection_with_gateway, tmp_path, hosts=("gpu-a",), groups={"gateways": gateways},
                           args=["--tags", "stop"])
    assert rc == 0, output
    assert ran["gpu-a"] == ([("gateway:drain", "stop")] if gateways else []) + [("rank_container", "stop")], output


def test_heal_leaves_a_box_stopped_on_purpose_alone(collection, tmp_path):
    # Port 1: nothing answers, which heal would otherwise take for a box to restart.
    data = tmp_path / "data"
    (data / ".state").mkdir(parents=True)
    (data / ".state" / "stopped").write_text("stopped on purpose\n")
    host_vars = {"gpu-a": {"tensorfold_port": 1, "tensorfold_data_dir": str(data)}, "gpu-b": {"tensorfold_port": 1}}
    rc, output, ran = site(collection, tmp_path, host_vars=host_vars, playbook="heal")
    assert rc == 0, output
    assert ran["gpu-a"] == [] and roles(ran["gpu-b"]) == ["rank_container", "smoke_test"], output
    summary = heal_summary(output)
    assert summary["gpu-a"].startswith("stopped on purpose, left alone") and summary["gpu-b"].startswith("restarted"), output
    assert report_lines(tmp_path)["gpu-a"]["status"] == "stopped", output


def heal_at_a_gateway(collection, tmp_path, engine_port, args=(), restart_fails=False):
    """heal.yml against a stand-in HAProxy: gpu-a healthy, gpu-b's completion fails (port 1: it is
    restarted), gpu-c stopped on purpose (drained at the gateway); gw-1's URL names a role default
    and is set for the gateway only, as the demo's is. Returns (rc, output, report, fake)."""
    fake = fake_haproxy({"gpu-a": {"status": "UP", "scur": 0}, "gpu-b": {"status": "DOWN", "scur": 0},
                         "gpu-c": {"status": "MAINT", "scur": 0}})
    data = tmp_path / "data-c"
    (data / ".state").mkdir(parents=True)
    (data / ".state" / "stopped").write_text("stopped on purpose\n")
    gateway = {"gateway_runtime_socket": fake.path, "gateway_state_file": str(tmp_path / "server-state"),
               "gateway_public_url": "http://gw.example:{{ gateway_port }}/v1"}
    box_b = {"tensorfold_port": 1}
    if restart_fails:
        box_b["stub_fail"] = {"smoke_test": "[E_SMOKE] gpu-b: no answer. Read rank0.log."}
    host_vars = {"gpu-a": {"tensorfold_port": engine_port}, "gpu-b": box_b,
                 "gpu-c": {"tensorfold_port": 1, "tensorfold_data_dir": str(data)}, "gw-1": gateway}
    rc, output, _ = site(collection, tmp_path, hosts=("gpu-a", "gpu-b", "gpu-c"), host_vars=host_vars,
                         playbook="heal", groups={"gateways": ["gw-1"]}, args=list(args))
    report = json.loads((tmp_path / "reports" / "fleet-report.json").read_text())
    return rc, output, report, fake


def gateway_column(report):
    return dict((line["host"], (line.get("gateway") or {}).get("state")) for line in report["hosts"])


def test_heals_report_has_each_boxs_state_at_the_gateway(collection, tmp_path, engine_port):
    rc, output, report, fake = heal_at_a_gateway(collection, tmp_path, engine_port)
    assert rc == 0, output
    assert heal_summary(output)["gpu-b"].startswith("restarted"), output
    # Healthy: the probe's answer; restarted: undrain's (back up); stopped: as the gateway has it.
    assert gateway_column(report) == {"gpu-a": "up", "gpu-b": "up", "gpu-c": "drained"}, report["hosts"]
    # The URL site.yml's report shows: the gateway's own gateway_public_url, with its defaults.
    assert report["gateways"] == ["http://gw.example:8020/v1"], report
    assert report["gateway_lines"][0] == "Gateway: http://gw.example:8020/v1 (2 of 3 boxes up).", report
    assert report["gateway_lines"][1].startswith("- **gpu-c** at the gateway: drained (MAINT"), report
    markdown = (tmp_path / "reports" / "fleet-report.md").read_text()
    assert "| gateway |" in markdown and "Gateway: http://gw.example:8020/v1 (2 of 3 boxes up)." in markdown, markdown


def test_heals_report_has_a_box_whose_restart_failed_as_the_rescue_left_it(collection, tmp_path, engine_port):
    rc, output, report, fake = heal_at_a_gateway(collection, tmp_path, engine_port, restart_fails=True)
    assert rc != 0, output
    # Drained for its restart, and left drained by the rescue: its engine (port 1) does not answer.
    assert fake.servers["gpu-b"]["status"] == "MAINT", output
    # The run stopped before gpu-c: heal did not look at it, so it has no state there.
    assert gateway_column(report) == {"gpu-a": "up", "gpu-b": "drained", "gpu-c": None}, report["hosts"]
    assert "- **gpu-b** at the gateway: drained (MAINT" in "\n".join(report["gateway_lines"]), report


def test_heal_in_check_mode_reports_each_boxs_state_at_the_gateway_as_it_is(collection, tmp_path, engine_port):
    rc, output, report, fake = heal_at_a_gateway(collection, tmp_path, engine_port, args=["--check"])
    assert rc == 0, output
    assert not [c for c in fake.commands if c.startswith("set server")], fake.commands
    # Nothing changed at the gateway: gpu-b, which heal would restart, is as its check has it.
    assert gateway_column(report) == {"gpu-a": "up", "gpu-b": "down", "gpu-c": "drained"}, report["hosts"]
    assert report["gateways"] == ["http://gw.example:8020/v1"], report


# A login that is not root and no become to root: `su` to nobody stands for an inventory's
# ansible_user without ansible_become.
NOT_ROOT = {"ansible_become": True, "ansible_become_method": "su", "ansible_become_user": "nobody",
            "ansible_become_flags": "-s /bin/sh"}


def test_a_box_a_step_would_not_reach_as_root_fails_before_that_step_changes_anything(collection, tmp_path):
    # A rolling restart: pre-flight reads no box (the stubs' records would need root here), and
    # the restart's step is the first to reach the boxes.
    rc, output, ran = site(collection, tmp_path, host_vars={"gpu-b": NOT_ROOT},
                           args=["--tags", "restart", "-e", "tensorfold_restart_max_fail_percentage=100"])
    assert rc != 0 and "PLAY [Fleet report" in output, output
    assert roles(ran["gpu-a"]) == ["rank_container", "smoke_test"], output
    assert ran["gpu-b"] == [], output
    line = report_lines(tmp_path)["gpu-b"]
    assert line["codes"] == ["E_SETTINGS"] and line["stage"] == "restart", line
    assert "user id 65534, not root" in " ".join(line["errors"]) and "ansible_become: true" in line["todo"], line
