# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.glm53.tensorfold.plugins.module_utils.plan import (
    docker_run, downloads, first_context, plan_lines, rank_argv)

SETTINGS = {
    "tensorfold_model_source": "download", "tensorfold_model_repo": "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold",
    "tensorfold_model_revision": "078455ffe6472f9a52fbc1139f58b9db2881b25c", "tensorfold_ablit": False,
    "tensorfold_drafter": "dflash2", "tensorfold_drafter_repo": "incoai/GLM-5.3-Flash-DFlash2",
    "tensorfold_drafter_revision": "bf582e4eacc1810f76656d1811693ff6c6737d2a", "tensorfold_served_name": "GLM-5.3-Flash",
    "tensorfold_gpus": [1, 0], "tensorfold_memory_reserve_gib": 3.5, "tensorfold_parallel": 4, "tensorfold_context": "auto",
    "tensorfold_kv": "fp8", "tensorfold_thinking": False, "tensorfold_reasoning_effort": "high", "tensorfold_max_tokens": 32768,
    "tensorfold_vision": True, "tensorfold_host": "0.0.0.0", "tensorfold_port": 8021, "tensorfold_nccl_port": 29583,
    "tensorfold_api_key": "", "tensorfold_data_dir": "/srv/glm53", "tensorfold_container_name": "glm53-zig",
}


def test_rank_zero_serves_the_api_both_load_with_the_same_flags():
    zero, one = rank_argv(SETTINGS, 0), rank_argv(SETTINGS, 1)
    assert zero[1:3] == ["serve", "/model"]
    assert zero[zero.index("--port") + 1] == "8021"
    assert "--port" not in one and "--name" not in one
    # The ranks compare a fingerprint of the shared flags, so rank 1 loads with --vision too, as
    # the runner starts it.
    assert "--vision" in zero and "--vision" in one
    assert zero[:zero.index("--rank")] == one[:one.index("--rank")]
    for argv, rank in ((zero, 0), (one, 1)):
        assert argv[argv.index("--rank") + 1] == str(rank)
        assert argv[argv.index("--master") + 1] == "127.0.0.1"
        assert argv[argv.index("--master-port") + 1] == "29583"
        assert argv[argv.index("--context") + 1] == "1048576"
        assert "--no-thinking" in argv and argv[argv.index("--drafter") + 1] == "/drafter"


def test_drafter_and_context_settings_change_the_flags():
    settings = dict(SETTINGS, tensorfold_drafter="none", tensorfold_context=65536, tensorfold_thinking=True)
    argv = rank_argv(settings, 0)
    assert "--no-drafts" in argv and "--drafter" not in argv and "--thinking" in argv
    assert argv[argv.index("--context") + 1] == "65536"
    assert "--drafter" not in rank_argv(dict(SETTINGS, tensorfold_drafter="mtp"), 0)
    assert first_context(SETTINGS, cached=262144) == 262144


def test_api_key_is_never_in_a_command_line():
    settings = dict(SETTINGS, tensorfold_api_key="sk-canary-123456")
    text = "\n".join(plan_lines(settings, {"image_ref": "glm53-tensorfold:abc", "image_present": True}))
    assert "sk-canary-123456" not in text
    assert "type=bind,source=/srv/glm53/.state/api-key,target=/run/tensorfold/api-key,readonly" in text
    assert "Authorization: Bearer <key>" in text
    rank0 = [line for line in text.splitlines() if line.startswith("rank 0")][0]
    assert "--api-key-file /run/tensorfold/api-key" in rank0


def test_docker_run_pins_cards_by_uuid_in_rank_order_when_known():
    gpus = [{"index": 1, "uuid": "GPU-bbbb"}, {"index": 0, "uuid": "GPU-aaaa"}]
    line = docker_run(SETTINGS, "glm53-tensorfold:abc", "/srv/glm53/model", "/srv/glm53/drafter", "/srv/glm53/logs/current", gpus)
    argv = shlex.split(line.split(";")[0])
    assert argv[argv.index("--gpus") + 1] == '"device=GPU-bbbb,GPU-aaaa"'
    assert "type=bind,source=/srv/glm53/model,target=/model,readonly" in argv and "--init" in argv
    assert "memlock=-1:-1" in argv and "HF_HUB_OFFLINE=1" in argv
    assert argv[-3:] == ["glm53-tensorfold:abc", "/bin/bash", "/logs/runner.sh"]
    assert '"device=1,0"' in docker_run(SETTINGS, "x", "/m", "", "/l")


def test_the_plans_docker_run_is_the_argv_the_module_runs():
    # One builder (engine_args.container_run_argv) for both: the plan shows the cache mount, the
    # labels, --restart no, the container's own environment and ulimits, and the policy given later.
    settings = dict(SETTINGS, rank_container_env={"NCCL_DEBUG": "WARN"}, rank_container_ulimits=["memlock:-1:-1"],
                    rank_container_cache_dir="/fast/cache", rank_container_restart_policy="on-failure:3")
    line = docker_run(settings, "img:1", "/srv/glm53/model", "", "/srv/glm53/logs/current")
    run, update = line.split("; once the API answers: ")
    argv = shlex.split(run)
    assert update == "docker update --restart on-failure:3 glm53-zig"
    assert argv[1:argv.index("--label")] == ["run", "-d", "--name", "glm53-zig", "--init", "--ipc", "host", "--network",
                                             "host", "--shm-size", "16g", "--restart", "no", "-e", "HF_HUB_OFFLINE=1",
                                             "-e", "NCCL_DEBUG=WARN", "--ulimit", "memlock=-1:-1"]
    assert "type=bind,source=/fast/cache,target=/root/.cache/tensorfold" in argv
    assert "glm53.tensorfold.rank_container.settings=<settings fingerprint>" in argv
    assert docker_run(dict(settings, rank_container_gpu_requests=False, rank_container_restart_policy="no"),
                      "img:1", "/m", "", "/l").count("--gpus") == 0


def test_downloads_follow_the_source_and_what_is_present():
    items = downloads(SETTINGS, {"model": True, "drafter": False})
    assert [(i["what"].split()[0], i["needed"]) for i in items] == [("checkpoint", False), ("DFlash2", True)]
    assert downloads(dict(SETTINGS, tensorfold_model_source="local", tensorfold_drafter="mtp")) == []
    ablit = downloads(dict(SETTINGS, tensorfold_ablit=True))
    assert ablit[0]["dest"] == "/srv/glm53/model-ablit" and ablit[0]["about_gib"] == 164


def test_plan_says_what_is_not_known_instead_of_guessing():
    text = "\n".join(plan_lines(SETTINGS, {}))
    assert "image: not known" in text
    assert "would download about 164 GiB" in text and "would download about 10 GiB" in text
    lines = plan_lines(SETTINGS, {"image_ref": "r:t", "image_present": False, "model_present": True, "drafter_present": True})
    assert "image: r:t (missing, would build)" in lines
    assert any(line.startswith("build: DOCKER_BUILDKIT=1 docker build --tag r:t") for line in lines)
    assert not any("would download" in line for line in lines)
    assert [line.split(" ")[1] for line in lines if line.startswith("rank ")] == ["1", "0"]


def test_key_flag_alone_is_enough_to_plan_the_auth_requests():
    text = "\n".join(plan_lines(dict(SETTINGS, tensorfold_api_key_set=True), {}))
    assert "without a key: expects 401" in text and "--api-key-file" in text


def test_settings_without_a_flag_travel_in_the_ranks_environment_and_are_marked_unconfirmed():
    settings = dict(SETTINGS, tensorfold_kv_pages=False, tensorfold_dense="q6", tensorfold_head="q8", tensorfold_w8a8=True)
    lines = plan_lines(settings, {})
    env_line = [line for line in lines if line.startswith("ranks' environment")][0]
    for pair in ("TENSORFOLD_KV_PAGES=0", "TF_GLM_DENSE=q6", "TENSORFOLD_HEAD=q8", "TENSORFOLD_W8A8=1",
                 "TENSORFOLD_ABSORB_MMA=0", "TENSORFOLD_MEMORY_RESERVE_GIB=3.5"):
        assert pair in env_line.split()
    names = [line for line in lines if line.startswith("engine names:")][0]
    assert "not confirmed" in names and "tensorfold_dense TF_GLM_DENSE" in names


def test_an_overridden_name_moves_the_setting_to_a_flag():
    settings = dict(SETTINGS, tensorfold_dense="q6", tensorfold_engine_names={"dense": "--dense", "head": "TF_HEAD"})
    argv = rank_argv(settings, 1)
    assert argv[argv.index("--dense") + 1] == "q6"
    lines = plan_lines(settings, {})
    env_line = [line for line in lines if line.startswith("ranks' environment")][0]
    assert "TF_HEAD=bf16" in env_line and "TF_GLM_DENSE" not in env_line and "TENSORFOLD_HEAD" not in env_line


def test_the_planned_smoke_requests_go_where_the_box_reaches_its_api():
    def smoke_lines(host):
        return [line for line in plan_lines(dict(SETTINGS, tensorfold_host=host), {}) if line.startswith("smoke: ")]
    assert all("http://127.0.0.1:" in line for line in smoke_lines("0.0.0.0") + smoke_lines("::"))
    assert smoke_lines("10.0.0.5") and all("http://10.0.0.5:" in line for line in smoke_lines("10.0.0.5"))
    assert all("http://[fd00::5]:" in line for line in smoke_lines("fd00::5"))
