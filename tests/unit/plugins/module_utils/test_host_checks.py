# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.host_checks import (
    fleet_summary,
    host_problems,
    judged,
    observe,
    shown,
    status,
    verdict,
)

RTX = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


def gpu(index, name=RTX, used=2, free=97250, power=400.0, processes=None, mig="Disabled", placeholders=None):
    return {"index": index, "uuid": "GPU-%d" % index, "name": name, "pci_bus_id": "0:%d" % index,
            "memory_total_mib": 97887, "memory_used_mib": used, "memory_free_mib": free,
            "compute_cap": "12.0", "power_limit_w": power, "mig_mode": mig, "placeholders": placeholders or {},
            "processes": processes or []}


HEALTHY = {
    "system": "Linux", "architecture": "x86_64", "user": "root",
    "tools": {"curl": "/usr/bin/curl", "flock": "/usr/bin/flock"},
    "docker": {"ok": True, "error": "", "runtimes": ["runc", "nvidia"], "groups": None, "own_container_running": False},
    "gpu_info": {"gpus": [gpu(0), gpu(1)], "driver_version": "580.95.05", "cuda_version": "13.0"},
    "peer": {"read": {"0-1": "OK", "1-0": "OK"}, "write": {"0-1": "OK", "1-0": "OK"}, "peer_ok": True},
    "resources": {
        "filesystems": [{"mount": "/", "free_gib": 500.0, "need_gib": 230, "ok": True,
                         "paths": [{"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 180}]}],
        "memory_available_mib": 64000,
        "ports": [{"port": 8020, "free": True, "why": ""}],
    },
}
EXPECT = {"gpu_count": 2, "gpu_indices": [0, 1], "model_pattern": "RTX PRO 6000 Blackwell", "min_driver": "580",
          "min_cuda": "13.0", "min_free_mib": 88000, "max_used_mib": 4096, "power_cap_w": 400, "p2p": True,
          "docker": True, "min_host_memory_gib": 16}


def observed(**changes):
    result = copy.deepcopy(HEALTHY)
    result.update(changes)
    return result


def codes(problems):
    return [p["code"] for p in problems]


def test_a_healthy_box_passes():
    problems = host_problems("gpu1", HEALTHY, EXPECT)
    assert problems == []
    assert status(problems) == "pass"


def test_busy_gpu_is_reported_with_its_process_and_memory():
    busy = gpu(0, used=20482, free=77405, processes=[{"pid": 4242, "name": "python3", "used_memory_mib": 20480}])
    problems = host_problems("gpu2", observed(gpu_info={"gpus": [busy, gpu(1)], "driver_version": "580.95.05",
                                                        "cuda_version": "13.0"}), EXPECT)
    assert codes(problems) == ["E_GPU_MEMORY", "E_GPU_BUSY"]
    assert "GPU 0 uses 20482 MiB (a GPU must use under 4096 MiB) and runs python3 (pid 4242, 20480 MiB)" in problems[1]["message"]
    assert problems[1]["gpu"] == 0


@pytest.mark.parametrize("used,busy", [(4095, False), (4096, True), (4097, True)])
def test_a_gpu_passes_only_under_the_used_limit(used, busy):
    # The recipe: "under 4,096 MiB used"; exactly the limit is busy.
    info = {"gpus": [gpu(0, used=used), gpu(1)], "driver_version": "580.95.05", "cuda_version": "13.0"}
    problems = host_problems("gpu2", observed(gpu_info=info), EXPECT)
    assert codes(problems) == (["E_GPU_BUSY"] if busy else [])
    if busy:
        assert "GPU 0 uses %d MiB (a GPU must use under 4096 MiB)" % used in problems[0]["message"]


def test_disk_names_only_what_is_still_missing():
    resources = dict(HEALTHY["resources"], filesystems=[{
        "mount": "/", "free_gib": 20.0, "need_gib": 40, "ok": False,
        "paths": [{"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 0, "in_place": "verified in place"},
                  {"name": "image build", "path": "/var/lib/docker", "need_gib": 40, "in_place": ""}]}])
    problems = host_problems("gpu2", observed(resources=resources), EXPECT)
    assert codes(problems) == ["E_DISK"]
    assert "image build at /var/lib/docker (40 GiB)" in problems[0]["message"]
    assert "checkpoint" not in problems[0]["message"]


def test_missing_p2p_warns_and_does_not_fail():
    peer = {"read": {"0-1": "CNS", "1-0": "CNS"}, "write": {"0-1": "CNS", "1-0": "CNS"}, "peer_ok": False}
    problems = host_problems("gpu3", observed(peer=peer), EXPECT)
    assert codes(problems) == ["W_P2P"]
    assert status(problems) == "warn"
    assert "GPU 0 -> GPU 1: read CNS" in problems[0]["message"]


def test_one_h200_fails_with_its_name_and_count():
    info = {"gpus": [gpu(0, name="NVIDIA H200", free=143156, power=700.0)], "driver_version": "580.159.04",
            "cuda_version": "13.0"}
    problems = host_problems("h200", observed(gpu_info=info, peer={"skipped": True}), EXPECT)
    assert codes(problems) == ["E_GPU", "E_GPU", "E_GPU", "W_POWER"]
    assert "found 1 GPU(s) (GPU 0: NVIDIA H200), expected at least 2" in problems[0]["message"]
    assert "GPU 1 (tensorfold_gpus) is not on this host" in problems[1]["message"]
    assert "GPU 0 is NVIDIA H200, not a card matching 'RTX PRO 6000 Blackwell'" in problems[2]["message"]


def test_h200_passes_with_expectations_for_that_card_and_no_docker():
    info = {"gpus": [gpu(0, name="NVIDIA H200", free=143156, power=700.0)], "driver_version": "580.159.04",
            "cuda_version": "13.0"}
    expect = dict(EXPECT, gpu_count=1, gpu_indices=[0], model_pattern="H200", power_cap_w=700, docker=False)
    docker = {"ok": False, "error": "No such file or directory", "runtimes": []}
    assert host_problems("h200", observed(gpu_info=info, peer=None, docker=docker), expect) == []


def test_every_problem_is_gathered_in_the_recipes_order():
    bad = observed(
        system="Linux", architecture="aarch64", user="ops",
        tools={"curl": None, "flock": "/usr/bin/flock"},
        docker={"ok": True, "runtimes": ["runc"], "groups": ["ops", "sudo"], "own_container_running": False},
        gpu_info={"gpus": [gpu(0, power=600.0), gpu(1)], "driver_version": "575.64.05", "cuda_version": "12.9"},
        resources={"filesystems": [{"mount": "/srv", "free_gib": 100.0, "need_gib": 190, "ok": False,
                                    "paths": [{"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 180},
                                              {"name": "drafter", "path": "/srv/glm53/drafter", "need_gib": 10}]}],
                   "memory_available_mib": 8192,
                   "ports": [{"port": 8020, "free": False, "why": "port 8020 is in use on 0.0.0.0"}]},
    )
    problems = host_problems("gpu9", bad, EXPECT)
    assert codes(problems) == ["E_PLATFORM", "E_DEPENDENCY", "E_DOCKER_GROUP", "E_NVIDIA_RUNTIME", "E_DRIVER",
                               "W_POWER", "E_DISK", "W_MEMORY", "E_PORT"]
    assert problems[6]["message"].startswith("[E_DISK] gpu9: /srv has 100 GiB free; checkpoint at /srv/glm53/model")
    assert "need 190 GiB there" in problems[6]["message"]
    assert problems[8]["port"] == 8020


def test_docker_down_is_one_problem_and_the_switch_skips_it():
    down = observed(docker={"ok": False, "error": "Cannot connect to the Docker daemon", "runtimes": []})
    assert codes(host_problems("h", down, EXPECT)) == ["E_DOCKER"]
    assert host_problems("h", down, dict(EXPECT, docker=False)) == []


def test_nvidia_smi_failure_is_a_gpu_problem_with_its_words():
    failed = observed(gpu_info={"failed": True, "msg": "nvidia-smi is not on PATH"}, peer={"skipped": True})
    problems = host_problems("h", failed, EXPECT)
    assert codes(problems) == ["E_GPU"]
    assert "could not read the GPUs: nvidia-smi is not on PATH" in problems[0]["message"]


def test_the_recipes_own_running_ranks_do_not_make_the_host_busy():
    busy = gpu(0, used=90000, free=7000, processes=[{"pid": 1, "name": "tensorfold", "used_memory_mib": 90000}])
    running = observed(docker=dict(HEALTHY["docker"], own_container_running=True),
                       gpu_info={"gpus": [busy, gpu(1)], "driver_version": "580.95.05", "cuda_version": "13.0"},
                       resources=dict(HEALTHY["resources"], ports=[{"port": 8020, "free": False, "why": "in use"}]))
    assert host_problems("h", running, EXPECT) == []


def test_fleet_summary_has_a_line_per_host_and_counts():
    results = [("a", {"status": "pass", "problems": []}),
               ("b", {"status": "warn", "problems": [{"code": "W_P2P", "message": "[W_P2P] b: x"}]}),
               ("c", {"status": "fail", "problems": [{"code": "E_GPU", "message": "m1"}, {"code": "E_GPU", "message": "m2"},
                                                     {"code": "W_P2P", "message": "m3"}]}),
               ("d", None)]
    summary = fleet_summary(results)
    assert summary["lines"] == ["a: pass", "b: warnings (W_P2P)", "c: FAIL (E_GPU, W_P2P)",
                                "d: FAIL (no result: the host was unreachable or failed before the checks)"]
    assert summary["counts"] == {"pass": 1, "warn": 1, "fail": 2}
    assert summary["hosts"]["c"]["codes"] == ["E_GPU", "W_P2P"]
    assert fleet_summary(dict(results))["lines"] == summary["lines"]


def test_docker_not_installed_is_said_so_once():
    missing = observed(tools={"curl": "/usr/bin/curl", "docker": None},
                       docker={"ok": False, "error": "Error executing command.", "runtimes": []})
    problems = host_problems("h", missing, EXPECT)
    assert codes(problems) == ["E_DOCKER"]
    assert "docker is not installed (not on PATH)" in problems[0]["message"]


RESOURCES = dict(HEALTHY["resources"], system="Linux", architecture="x86_64", user="deploy",
                 tools={"curl": "/usr/bin/curl", "docker": "/usr/bin/docker"})
# host_resources' docker answer (asked with docker: true) and gpu_info's peer (asked with p2p_gpus).
DOCKER = {"ok": True, "error": "", "runtimes": ["nvidia", "runc"], "root_dir": "/var/lib/docker",
          "groups": ["deploy", "adm", "docker"], "own_container_running": True}


def test_observe_reads_the_two_results_of_the_role():
    seen = observe(dict(RESOURCES, docker=DOCKER), dict(HEALTHY["gpu_info"], peer=HEALTHY["peer"]))
    assert (seen["system"], seen["architecture"], seen["user"]) == ("Linux", "x86_64", "deploy")
    assert seen["tools"] == RESOURCES["tools"] and seen["docker"] == DOCKER and seen["peer"] == HEALTHY["peer"]
    assert host_problems("gpu1", seen, dict(EXPECT, docker=True)) == []


def test_observe_a_silent_docker_daemon_is_e_docker():
    silent = {"ok": False, "error": "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.", "runtimes": [],
              "root_dir": "/var/lib/docker", "groups": ["deploy"], "own_container_running": False}
    seen = observe(dict(RESOURCES, docker=silent), dict(HEALTHY["gpu_info"], peer=HEALTHY["peer"]))
    assert codes(host_problems("gpu1", seen, EXPECT)) == ["E_DOCKER"]
    assert "Cannot connect to the Docker daemon" in host_problems("gpu1", seen, EXPECT)[0]["message"]


def test_a_docker_that_is_podman_is_e_docker_naming_podman_not_a_missing_runtime():
    podman = {"ok": False, "error": "docker is Podman 4.9.3 (the podman-docker package), not Docker Engine",
              "engine": "podman", "runtimes": [], "root_dir": "/var/lib/docker", "groups": None,
              "own_container_running": False}
    problems = host_problems("gpu1", observed(docker=podman), EXPECT)
    assert codes(problems) == ["E_DOCKER"]
    assert "docker is Podman 4.9.3 (the podman-docker package), not Docker Engine" in problems[0]["message"]
    assert "does not answer" not in problems[0]["message"]


def test_the_nvidia_runtime_without_the_hook_docker_run_gpus_needs_is_e_nvidia_runtime():
    # nvidia-container-toolkit-base (nvidia-ctk, the runtime) without nvidia-container-toolkit (the hook), or a
    # daemon.json left behind by a removed toolkit: docker info lists nvidia, but docker run --gpus fails.
    no_hook = observed(docker=dict(HEALTHY["docker"], gpu_hook=None))
    problems = host_problems("gpu1", no_hook, EXPECT)
    assert codes(problems) == ["E_NVIDIA_RUNTIME"]
    assert "no nvidia-container-runtime-hook on its PATH" in problems[0]["message"]
    assert host_problems("gpu1", observed(docker=dict(HEALTHY["docker"], gpu_hook="/usr/bin/nvidia-container-runtime-hook")),
                         EXPECT) == []
    assert host_problems("gpu1", HEALTHY, EXPECT) == []  # not looked at: not judged


def test_the_hook_without_the_nvidia_runtime_serves_docker_run_gpus_and_passes():
    # nvidia-container-toolkit installed, `nvidia-ctk runtime configure` never run: docker run --gpus works (dockerd
    # injects the hook), which is all the engine's start asks.
    hook_only = observed(docker=dict(HEALTHY["docker"], runtimes=["io.containerd.runc.v2", "runc"],
                                     gpu_hook="/usr/bin/nvidia-container-runtime-hook"))
    assert host_problems("gpu1", hook_only, EXPECT) == []
    neither = observed(docker=dict(HEALTHY["docker"], runtimes=["runc"], gpu_hook=None))
    assert codes(host_problems("gpu1", neither, EXPECT)) == ["E_NVIDIA_RUNTIME"]


def test_observe_without_docker_asked_or_peer_read_judges_neither():
    seen = observe(RESOURCES, dict(HEALTHY["gpu_info"], peer={"skipped": True, "msg": "not asked"}))
    assert seen["docker"]["ok"] is False and seen["docker"]["groups"] is None
    assert seen["peer"]["skipped"] is True
    assert codes(host_problems("gpu1", seen, dict(EXPECT, docker=False, p2p=False))) == []


# One task reads and judges a host (gpu_host_verdict with host_resources): host_resources' answer
# carries gpu_info's in its own `gpu_info` key.
ANSWER = dict(RESOURCES, docker=dict(DOCKER, own_container_running=False),
              gpu_info=dict(HEALTHY["gpu_info"], gpus=[gpu(1), gpu(0, used=20482), gpu(2)], peer=HEALTHY["peer"]))


def test_verdict_judges_the_answer_and_returns_the_checked_gpus_in_rank_order():
    answer = verdict("gpu1", ANSWER, ANSWER["gpu_info"], dict(EXPECT, gpu_indices=[1, 0]))
    assert answer["status"] == "fail" and codes(answer["problems"]) == ["E_GPU_BUSY"]
    assert [g["index"] for g in answer["gpus"]] == [1, 0]
    assert answer["problems"][0]["message"].startswith("[E_GPU_BUSY] gpu1: GPU 0 uses 20482 MiB")


def test_verdict_of_unreadable_gpus_is_e_gpu_and_no_gpus():
    failed = {"failed": True, "msg": "nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate with the driver"}
    answer = verdict("gpu1", dict(ANSWER, gpu_info=failed), failed, EXPECT)
    assert codes(answer["problems"]) == ["E_GPU"] and answer["gpus"] == []
    assert "couldn't communicate with the driver" in answer["problems"][0]["message"]


def test_shown_fails_an_erroneous_host_with_every_message_only_when_asked():
    answer = verdict("gpu1", dict(ANSWER, memory_available_mib=1024), ANSWER["gpu_info"], EXPECT)
    messages = [p["message"] for p in answer["problems"]]
    assert codes(answer["problems"]) == ["E_GPU_BUSY", "W_MEMORY"]
    assert shown(answer, fail=True) == {"failed": True, "msg": messages}
    assert shown(answer, fail=False) == {"warnings": messages}


def test_shown_warns_a_host_with_warnings_only_and_says_nothing_of_a_clean_one():
    warned = verdict("gpu1", dict(ANSWER, memory_available_mib=1024), dict(ANSWER["gpu_info"], gpus=[gpu(0), gpu(1)]), EXPECT)
    assert warned["status"] == "warn"
    assert shown(warned, fail=True) == {"warnings": [warned["problems"][0]["message"]]}
    clean = verdict("gpu1", ANSWER, dict(ANSWER["gpu_info"], gpus=[gpu(0), gpu(1)]), EXPECT)
    assert clean["status"] == "pass" and shown(clean, fail=True) == {} and shown(clean, fail=False) == {}


def test_a_registered_result_without_a_verdict_counts_as_no_result():
    # The read itself failed (the module could not run): the task's registered result has no status.
    crashed = {"failed": True, "msg": "MODULE FAILURE", "changed": False}
    assert judged(crashed) is None and judged(None) is None
    assert judged({"status": "warn", "problems": []}) == {"status": "warn", "problems": []}
    summary = fleet_summary([("a", crashed), ("b", {"status": "pass", "problems": [], "changed": False})])
    assert summary["lines"] == ["a: FAIL (no result: the host was unreachable or failed before the checks)", "b: pass"]
    assert summary["hosts"]["a"]["codes"] == ["NO_RESULT"] and summary["counts"]["fail"] == 1


def with_gpus(*gpus, **info):
    return observed(gpu_info=dict({"gpus": list(gpus), "driver_version": "580.95.05", "cuda_version": "13.0"}, **info))


def test_unreadable_gpu_memory_is_a_warning_naming_the_gpu_and_the_fields_never_a_silent_pass():
    error = {"memory.used": "[Unknown Error]", "memory.free": "[Unknown Error]"}
    denied = {"memory.used": "[Insufficient Permissions]"}
    problems = host_problems("h", with_gpus(gpu(0, used=None, free=None, placeholders=error),
                                            gpu(1, used=None, placeholders=denied)), EXPECT)
    assert codes(problems) == ["W_GPU_UNREAD", "W_GPU_UNREAD"] and status(problems) == "warn"
    assert problems[0]["message"].startswith(
        "[W_GPU_UNREAD] h: GPU 0's memory.used and memory.free cannot be read (nvidia-smi prints [Unknown Error]), "
        "so its memory was not checked. Read it as root with nvidia-smi -q -d MEMORY -i 0")
    assert "GPU 1's memory.used cannot be read (nvidia-smi prints [Insufficient Permissions])" in problems[1]["message"]
    assert (problems[0]["gpu"], problems[1]["fields"]) == (0, ["memory.used"])


def test_an_unreadable_power_limit_warns_only_when_the_cap_is_checked():
    card = gpu(1, power=None, placeholders={"power.limit": "[N/A]"})
    problems = host_problems("h", with_gpus(gpu(0), card), EXPECT)
    assert codes(problems) == ["W_GPU_UNREAD"]
    assert "GPU 1's power.limit cannot be read (nvidia-smi prints [N/A]), so the 400 W cap was not checked" in \
        problems[0]["message"]
    assert host_problems("h", with_gpus(gpu(0), card), dict(EXPECT, power_cap_w=0)) == []


@pytest.mark.parametrize("text,words", [
    ("[GPU requires reset]", "GPU 1 needs a reset (nvidia-smi prints [GPU requires reset]). Reset it with "
                             "nvidia-smi -r -i 1"),
    ("[GPU is lost]", "GPU 1 is lost to the driver (nvidia-smi prints [GPU is lost]). Reboot the host"),
])
def test_a_checked_gpu_that_needs_a_reset_or_is_lost_is_e_gpu_and_an_unchecked_one_is_not(text, words):
    def broken(index):
        return gpu(index, used=None, free=None, power=None,
                   placeholders={"memory.used": text, "memory.free": text, "power.limit": text})
    problems = host_problems("h", with_gpus(gpu(0), broken(1), gpu(2)), EXPECT)
    assert codes(problems) == ["E_GPU"] and problems[0]["gpu"] == 1  # not also "unreadable"
    assert words in problems[0]["message"]
    assert host_problems("h", with_gpus(gpu(0), gpu(1), broken(2)), EXPECT) == []


def test_a_checked_gpu_whose_name_cannot_be_read_says_so_not_that_it_is_another_card():
    unknown = {"name": "[Unknown Error]"}
    problems = host_problems("h", with_gpus(gpu(0), gpu(1, name=None, placeholders=unknown)), EXPECT)
    assert codes(problems) == ["E_GPU"] and problems[0]["gpu"] == 1
    assert problems[0]["message"] == (
        "[E_GPU] h: GPU 1's name cannot be read (nvidia-smi prints [Unknown Error]). Check the card: "
        "nvidia-smi -q -i 1 shows what the driver can read of it.")
    reset = {"name": "[GPU requires reset]"}
    problems = host_problems("h", with_gpus(gpu(0), gpu(1, name=None, placeholders=reset)), EXPECT)
    assert codes(problems) == ["E_GPU"] and "needs a reset" in problems[0]["message"]  # one problem, not two


@pytest.mark.parametrize("rc,out,err,words", [
    (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.82", "",
     "Reboot the host so that the upgraded driver's kernel module loads"),
    (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "modprobe nvidia"),
    (None, None, None, "modprobe nvidia"),  # only the message came through (its words are enough)
])
def test_a_driver_that_cannot_be_used_is_e_driver_with_its_own_advice(rc, out, err, words):
    said = "nvidia-smi --query-gpu=... failed with exit status %s: %s" % (
        rc, err or out or "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    failed = dict({"failed": True, "msg": said}, **({"rc": rc, "stdout": out, "stderr": err} if rc else {}))
    problems = host_problems("h", observed(gpu_info=failed, peer={"skipped": True}), EXPECT)
    assert codes(problems) == ["E_DRIVER"]
    assert words in problems[0]["message"] and "tensorfold_gpus" not in problems[0]["message"]


def test_mig_enabled_on_a_checked_gpu_is_e_gpu_with_how_to_turn_it_off():
    problems = host_problems("h", with_gpus(gpu(0, mig=None), gpu(1, mig="Enabled"), gpu(2, mig="Enabled")), EXPECT)
    assert codes(problems) == ["E_GPU"] and problems[0]["gpu"] == 1
    assert problems[0]["message"] == (
        "[E_GPU] h: GPU 1 has MIG mode enabled; a rank needs the whole card. Turn MIG off with nvidia-smi -i 1 -mig 0 "
        "(as root), then reset the GPU (nvidia-smi -r -i 1) or reboot the host.")


def test_compute_mode_prohibited_is_e_gpu_and_exclusive_process_a_warning_both_with_the_command():
    # nvidia-smi -c: Prohibited lets no CUDA context onto the card, Exclusive_Process one process at a time.
    cards = [dict(gpu(0), compute_mode="Exclusive_Process"), dict(gpu(1), compute_mode="Prohibited"),
             dict(gpu(2), compute_mode="Prohibited")]
    problems = host_problems("h", with_gpus(*cards), EXPECT)
    assert codes(problems) == ["W_COMPUTE_MODE", "E_GPU"] and [p["gpu"] for p in problems] == [0, 1]
    assert problems[0]["severity"] == "warning" and problems[1]["severity"] == "error"
    assert problems[0]["message"].startswith("[W_COMPUTE_MODE] h: GPU 0's compute mode is Exclusive_Process: ")
    assert problems[1]["message"] == (
        "[E_GPU] h: GPU 1's compute mode is Prohibited: no CUDA process may use it, so its rank cannot start. "
        "Set it to Default with nvidia-smi -i 1 -c DEFAULT (as root).")
    # Default, a card that does not say, and an answer without the field pass.
    quiet = [dict(gpu(0), compute_mode="Default"), dict(gpu(1), compute_mode=None)]
    assert host_problems("h", with_gpus(*quiet), EXPECT) == []


def test_a_power_limit_above_the_cap_on_a_card_without_persistence_says_to_turn_persistence_on_first():
    # NVIDIA's Driver Persistence guide: a software power cap lasts only while the card is initialized;
    # without persistence mode the driver deinitializes it when the last process exits, so a cap set
    # with nvidia-smi -pl is gone again when the next check reads it.
    cards = [dict(gpu(0, power=600.0), persistence_mode="Disabled"), dict(gpu(1, power=600.0), persistence_mode="Enabled")]
    problems = host_problems("h", with_gpus(*cards), EXPECT)
    assert codes(problems) == ["W_POWER", "W_POWER"]
    assert problems[0]["message"] == (
        "[W_POWER] h: GPU 0's power limit is 600 W, above 400 W; its persistence mode is off. Turn persistence mode on "
        "first (systemctl enable --now nvidia-persistenced, or nvidia-smi -pm 1 as root): without it the card forgets a "
        "cap set with nvidia-smi -pl as soon as no process uses it. Then cap it with nvidia-smi -i 0 -pl 400, or set "
        "gpu_host_checks_power_cap_w.")
    assert problems[1]["message"] == ("[W_POWER] h: GPU 1's power limit is 600 W, above 400 W. Cap the card with "
                                      "nvidia-smi -pl, or set gpu_host_checks_power_cap_w.")
    # Persistence off under the cap is no problem of the checks.
    assert host_problems("h", with_gpus(dict(gpu(0), persistence_mode="Disabled"), gpu(1)), EXPECT) == []


def test_no_gpu_under_the_proprietary_kernel_module_is_e_driver_saying_to_install_the_open_one():
    said = ("nvidia-smi --query-gpu=... failed with exit status 6 (exit 6: the driver sees no GPU): "
            "No devices were found")
    info = {"failed": True, "msg": said, "rc": 6, "stdout": "No devices were found\n", "stderr": "",
            "kernel_module_flavour": "proprietary"}
    problems = host_problems("h", observed(gpu_info=info), EXPECT)
    assert codes(problems) == ["E_DRIVER"]
    assert "the loaded NVIDIA kernel module is the proprietary flavour, which takes no Blackwell card" in problems[0]["message"]
    assert "Install the open kernel modules" in problems[0]["message"]
    # The open flavour, or a flavour not known: the cards themselves (E_GPU), as before.
    for flavour in ("open", None):
        assert codes(host_problems("h", observed(gpu_info=dict(info, kernel_module_flavour=flavour)), EXPECT)) == ["E_GPU"]


def test_a_gpu_nvidia_smi_cannot_reach_is_e_gpu_naming_its_bus_id():
    seen = with_gpus(gpu(0), gpu(1), unreachable=[{"pci_bus_id": "0000:41:00.0", "error": "Unknown Error"}])
    problems = host_problems("h", seen, dict(EXPECT, gpu_count=3))
    assert codes(problems) == ["E_GPU", "E_GPU"]
    assert "found 2 GPU(s)" in problems[0]["message"]
    assert problems[1]["message"].startswith("[E_GPU] h: nvidia-smi cannot reach the GPU at PCI 0000:41:00.0 "
                                             "(Unknown Error). Reboot the host")
    assert problems[1]["pci_bus_id"] == "0000:41:00.0"


def test_a_process_whose_memory_is_not_reported_says_so():
    busy = gpu(0, processes=[{"pid": 4242, "name": "python3", "used_memory_mib": None}])
    problems = host_problems("h", with_gpus(busy, gpu(1)), EXPECT)
    assert "GPU 0 runs python3 (pid 4242, memory not reported)" in problems[0]["message"]


def test_cards_without_peer_to_peer_are_not_blamed_on_iommu_or_the_bios():
    gns = {"0-1": "GNS", "1-0": "GNS"}
    problems = host_problems("h", observed(peer={"read": gns, "write": gns, "peer_ok": False}), EXPECT)
    assert codes(problems) == ["W_P2P"]
    assert "these cards do not support peer-to-peer" in problems[0]["message"]
    assert "IOMMU" not in problems[0]["message"] and "BIOS" not in problems[0]["message"]


def test_expectations_left_empty_take_their_defaults():
    # The action's typed spec gives every expectation not set as None.
    empty = dict((key, None) for key in EXPECT)
    answer = verdict("h", ANSWER, dict(ANSWER["gpu_info"], gpus=[gpu(0), gpu(1, power=600.0)]), empty)
    assert codes(answer["problems"]) == []  # no power cap unless one is set
    answer = verdict("h", ANSWER, dict(ANSWER["gpu_info"], gpus=[gpu(0)]), dict(empty, power_cap_w=400.0))
    assert codes(answer["problems"]) == ["E_GPU", "E_GPU"]  # two GPUs, [0, 1], by default


# A fresh box: no Docker, or Docker without the nvidia runtime. With the toolkit step later in the
# run (toolkit_follows) what it fixes is left to it; without it (--tags check, --tags start, the
# role alone) it fails the box as before. A deploy run's checks run as root, as its steps do.
NO_DOCKER = dict(ANSWER, user="root", tools=dict(RESOURCES["tools"], docker=None),
                 docker={"ok": False, "error": "docker is not installed (not on PATH)", "runtimes": [], "groups": None,
                         "own_container_running": False})
NO_RUNTIME = dict(ANSWER, user="root", docker=dict(ANSWER["docker"], runtimes=["runc"], groups=None))
# Docker runs, but the host's Python lacks requests, which Ansible's Docker modules import there.
NO_REQUESTS = dict(ANSWER, user="root", python="/usr/bin/python3", python_requests=False)
GOOD_GPUS = dict(ANSWER["gpu_info"], gpus=[gpu(0), gpu(1)])


@pytest.mark.parametrize("answer, code", [(NO_DOCKER, "E_DOCKER"), (NO_RUNTIME, "E_NVIDIA_RUNTIME"), (NO_REQUESTS, "E_DOCKER")])
def test_what_the_toolkit_step_fixes_is_left_to_it_and_does_not_fail_the_box(answer, code):
    left = verdict("gpu1", answer, GOOD_GPUS, EXPECT, toolkit_follows=True)
    assert left["status"] == "warn" and left["problems"] == []
    assert codes(left["left_to_toolkit"]) == [code]
    message = left["left_to_toolkit"][0]["message"]
    assert message.startswith("[%s] gpu1: " % code) and "the nvidia_toolkit step later in this run" in message
    assert shown(left, fail=True) == {"warnings": [message]}
    summary = fleet_summary([("gpu1", left)])
    assert summary["lines"] == ["gpu1: left to the toolkit step (%s)" % code]
    assert summary["counts"]["fail"] == 0 and summary["hosts"]["gpu1"]["left_to_toolkit"] == [code]


@pytest.mark.parametrize("answer, code", [(NO_DOCKER, "E_DOCKER"), (NO_RUNTIME, "E_NVIDIA_RUNTIME"), (NO_REQUESTS, "E_DOCKER")])
def test_without_the_toolkit_step_they_still_fail_the_box(answer, code):
    failed = verdict("gpu1", answer, GOOD_GPUS, EXPECT)
    assert failed["status"] == "fail" and codes(failed["problems"]) == [code] and failed["left_to_toolkit"] == []
    assert shown(failed, fail=True)["failed"] is True
    assert fleet_summary([("gpu1", failed)])["lines"] == ["gpu1: FAIL (%s)" % code]


def test_a_box_that_fails_anyway_keeps_every_problem_as_an_error():
    busy = dict(GOOD_GPUS, gpus=[gpu(0, used=20482), gpu(1)])
    answer = verdict("gpu1", NO_RUNTIME, busy, EXPECT, toolkit_follows=True)
    assert answer["status"] == "fail" and codes(answer["problems"]) == ["E_NVIDIA_RUNTIME", "E_GPU_BUSY"]
    assert answer["left_to_toolkit"] == []


def test_warnings_stay_beside_what_is_left_to_the_toolkit_step():
    answer = verdict("gpu1", dict(NO_RUNTIME, memory_available_mib=1024), GOOD_GPUS, EXPECT, toolkit_follows=True)
    assert answer["status"] == "warn" and codes(answer["problems"]) == ["W_MEMORY"]
    assert fleet_summary([("gpu1", answer)])["lines"] == ["gpu1: warnings (W_MEMORY); left to the toolkit step (E_NVIDIA_RUNTIME)"]


def test_a_deploy_run_whose_checks_ran_as_another_user_than_root_says_what_to_set():
    # A login without become: the steps after the checks could not install or write as root. What
    # that user sees of Docker and the ports (permission denied, the serving engine's port taken)
    # is not blamed: the next run judges it as root.
    as_deploy = dict(ANSWER, user="deploy", docker={
        "ok": False, "runtimes": [], "groups": ["deploy"], "own_container_running": False,
        "error": "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock"},
        ports=[{"port": 8020, "free": False, "why": "port 8020 is in use on 0.0.0.0"}])
    answer = verdict("gpu1", as_deploy, GOOD_GPUS, EXPECT, toolkit_follows=True)
    assert answer["status"] == "fail" and codes(answer["problems"]) == ["E_SETTINGS"], answer
    assert answer["left_to_toolkit"] == []
    message = answer["problems"][0]["message"]
    assert message.startswith("[E_SETTINGS] gpu1: the checks ran as user deploy, not root") and "ansible_become: true" in message
    # The other checks still speak.
    busy = dict(GOOD_GPUS, gpus=[gpu(0, used=20482), gpu(1)])
    assert codes(verdict("gpu1", as_deploy, busy, EXPECT, toolkit_follows=True)["problems"]) == ["E_SETTINGS", "E_GPU_BUSY"]
    # A read-only check run (no deploy step after it) judges the recipe's login: one in the docker group.
    no_group = dict(ANSWER, docker=dict(ANSWER["docker"], groups=["deploy"]))
    assert codes(verdict("gpu1", no_group, GOOD_GPUS, EXPECT)["problems"]) == ["E_DOCKER_GROUP"]
    assert codes(verdict("gpu1", ANSWER, GOOD_GPUS, EXPECT)["problems"]) == []


def test_a_python_without_requests_is_named_with_its_path_and_the_package():
    failed = verdict("gpu1", NO_REQUESTS, GOOD_GPUS, EXPECT)
    assert codes(failed["problems"]) == ["E_DOCKER"]
    assert "/usr/bin/python3 cannot import requests" in failed["problems"][0]["message"].replace("(", "").replace(")", "")
    assert "python3-requests" in failed["problems"][0]["message"]
    # Docker missing too: both are said, and both are the toolkit step's.
    both = dict(NO_DOCKER, python="/usr/bin/python3", python_requests=False)
    left = verdict("gpu1", both, GOOD_GPUS, EXPECT, toolkit_follows=True)
    assert left["status"] == "warn" and codes(left["left_to_toolkit"]) == ["E_DOCKER", "E_DOCKER"]
    # An answer that does not say (an older module) is no finding.
    assert codes(verdict("gpu1", ANSWER, GOOD_GPUS, EXPECT)["problems"]) == []
