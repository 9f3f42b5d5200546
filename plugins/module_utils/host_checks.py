# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The host checks of the recipe, as one pure function over what the role observed.

The gpu_host_checks role reads a host with one run of the read-only host_resources module (asked
with ``docker`` and ``gpus``: the Docker daemon, the GPUs, the driver and peer-to-peer too), in the
same task as the gpu_host_verdict action that judges it: ``verdict`` reads the answer with
``observe``, ``host_problems`` returns every problem as a
record (``codes.record``), in the recipe's order: platform, tools, Docker daemon, docker group,
NVIDIA runtime, GPU count, model and state (reachable, no reset needed, MIG off, compute mode),
driver, memory per GPU, compute processes, power cap, peer-to-peer, disk, host memory, ports. A GPU
value nvidia-smi cannot report is W_GPU_UNREAD, never a silent pass.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem, record
from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi import (
    driver_failure,
    gpu_fault,
    p2p_finding,
    version_at_least,
)


def _gpu_list(gpus):
    return ", ".join("GPU %s: %s" % (g.get("index"), g.get("name")) for g in gpus) or "none"


def _platform(host, observed, problems):
    system, arch = observed.get("system"), observed.get("architecture")
    if system != "Linux" or arch != "x86_64":
        problems.append(record("E_PLATFORM", host, "the host is %s %s; the recipe runs on Linux x86_64"
                               % (system or "an unknown system", arch or "of unknown architecture")))


def _tools(host, observed, problems):
    for name, path in sorted((observed.get("tools") or {}).items()):
        if not path and name != "docker":  # docker is the Docker check's (E_DOCKER)
            problems.append(record("E_DEPENDENCY", host, "%s is not on PATH" % name, tool=name))


def _docker(host, observed, expect, problems, toolkit_follows=False):
    docker = observed.get("docker") or {}
    if not expect.get("docker", True):
        return
    down = None
    if "docker" in (observed.get("tools") or {}) and not observed["tools"]["docker"]:
        down = "docker is not installed (not on PATH)"
    elif docker.get("engine") == "podman":
        # podman-docker's `docker`: no dockerd, no daemon.json, no nvidia runtime to register
        down = "%s; the recipe needs Docker Engine (dockerd, its daemon.json and --gpus)" % docker.get("error")
    elif not docker.get("ok"):
        down = "the Docker daemon does not answer (docker info: %s)" % (docker.get("error") or "no answer")
    if down:
        _toolkit_fixes(host, "E_DOCKER", down, problems)
        # Only the toolkit step could go on from here, and the group it gives
        # (nvidia_toolkit_docker_users) counts only from a new login: the group is judged now.
        if toolkit_follows:
            _docker_group(host, observed, docker, problems)
        _docker_library(host, observed, problems)
        return
    _docker_group(host, observed, docker, problems)
    _docker_library(host, observed, problems)
    runtimes = docker.get("runtimes") or []
    if "nvidia" not in runtimes and docker.get("gpu_hook"):
        return  # the engine's `docker run --gpus` is served by the hook dockerd found, no runtime needed
    if "nvidia" not in runtimes:
        _toolkit_fixes(host, "E_NVIDIA_RUNTIME", "docker info lists no nvidia runtime (runtimes: %s)"
                       % (", ".join(sorted(runtimes)) or "none"), problems)
    elif "gpu_hook" in docker and not docker["gpu_hook"]:
        # dockerd serves `docker run --gpus` (the engine's start) through this hook, not the runtime
        _toolkit_fixes(host, "E_NVIDIA_RUNTIME", "docker info lists the nvidia runtime, but dockerd finds no "
                       "nvidia-container-runtime-hook on its PATH, without which docker run --gpus fails (could not "
                       "select device driver); the nvidia-container-toolkit package has it", problems)


def _docker_library(host, observed, problems):
    """The image, plan and bundle steps run Ansible's Docker modules here, which import requests in
    the host's Python; the toolkit step installs the distribution's python3-requests."""
    if observed.get("python_requests") is False:
        _toolkit_fixes(host, "E_DOCKER", "the Python Ansible runs on this host (%s) cannot import requests, which "
                       "Ansible's Docker modules need here (the python3-requests package)"
                       % (observed.get("python") or "python3"), problems)


def _toolkit_fixes(host, code, finding, problems):
    """A problem the toolkit step fixes; ``finding`` keeps its words for ``leave_to_toolkit``."""
    problems.append(record(code, host, finding, finding=finding))


def _docker_group(host, observed, docker, problems):
    user = observed.get("user") or "root"
    groups = docker.get("groups")
    if user != "root" and groups is not None and "docker" not in groups:
        problems.append(record("E_DOCKER_GROUP", host, "user %s is not in the docker group" % user))


# What the nvidia_toolkit step fixes when it runs on the box later in the same run: it installs
# and starts Docker Engine (or fails E_DOCKER itself, with nvidia_toolkit_docker_install none) and
# registers the runtime, and its own checks fail the box when either is still missing then.
TOOLKIT_FIXES = ("E_DOCKER", "E_NVIDIA_RUNTIME")
LEFT_TO_TOOLKIT_TODO = ("Nothing to do now: the nvidia_toolkit step later in this run sets it up, "
                        "and its checks fail this box if it is still missing then.")


def leave_to_toolkit(host, problems):
    """``(problems, left)``: the problems the toolkit step fixes, taken out of ``problems`` and said
    again as left to it, when they are the box's only errors. A box that fails anyway leaves the run
    before that step, so it keeps every problem as an error."""
    if any(p["severity"] == "error" and p["code"] not in TOOLKIT_FIXES for p in problems):
        return problems, []
    kept = [p for p in problems if p["code"] not in TOOLKIT_FIXES]
    left = [dict(p, message=problem(p["code"], host, p["finding"], LEFT_TO_TOOLKIT_TODO))
            for p in problems if p["code"] in TOOLKIT_FIXES]
    return kept, left


NO_DOCKER_ANSWER = {"ok": False, "error": "Docker was not asked", "runtimes": [], "groups": None,
                    "own_container_running": False}


def observe(resources, gpu_info):
    """What ``host_problems`` judges, from the role's two read-only results: host_resources (asked
    with ``docker``: the daemon, its runtimes, the user's groups, the recipe's own container) and
    gpu_info (asked with ``p2p_gpus``: peer-to-peer in its ``peer``)."""
    resources = resources or {}
    gpu_info = gpu_info or {}
    return {
        "system": resources.get("system"),
        "architecture": resources.get("architecture"),
        "user": resources.get("user"),
        "python": resources.get("python"),
        "python_requests": resources.get("python_requests"),
        "tools": resources.get("tools") or {},
        "docker": resources.get("docker") or dict(NO_DOCKER_ANSWER),
        "gpu_info": gpu_info,
        "peer": gpu_info.get("peer"),
        "resources": resources,
    }


def select(gpus, indices):
    """The GPU dicts of ``indices`` in that order, and the indices the host lacks."""
    by_index = dict((g.get("index"), g) for g in gpus)
    return [by_index[i] for i in indices if i in by_index], [i for i in indices if i not in by_index]


def _gpus(host, observed, expect, problems):
    """GPU count, model and indices; returns the selected GPU dicts (empty when unreadable)."""
    info = observed.get("gpu_info") or {}
    if info.get("failed") or "gpus" not in info:
        said = info.get("msg") or "gpu_info gave no answer"
        # A driver that cannot be used fails every nvidia-smi call: that is the driver's problem.
        driver = driver_failure(info.get("rc"), info.get("stdout"), info.get("stderr") or said) if info else None
        if driver:
            problems.append(record("E_DRIVER", host, "could not read the GPUs: %s" % said, driver[1]))
        elif info.get("rc") == 6 and info.get("kernel_module_flavour") == "proprietary":
            # NVIDIA drives Blackwell cards only with its open kernel modules: the proprietary one loads and takes none.
            problems.append(record(
                "E_DRIVER", host, "could not read the GPUs: %s; the loaded NVIDIA kernel module is the proprietary "
                "flavour, which takes no Blackwell card (NVIDIA drives them only with its open kernel modules)" % said,
                "Install the open kernel modules of the driver in place of the proprietary ones (on Ubuntu "
                "nvidia-driver-BRANCH-open or nvidia-driver-BRANCH-server-open; from NVIDIA's repository nvidia-open), "
                "then reboot."))
        else:
            problems.append(record("E_GPU", host, "could not read the GPUs: %s" % said))
        return []
    gpus = info["gpus"]
    want = expect.get("gpu_count", 2)
    if len(gpus) < want:
        problems.append(record("E_GPU", host, "found %d GPU(s) (%s), expected at least %d"
                               % (len(gpus), _gpu_list(gpus), want), found=len(gpus)))
    selected, missing = select(gpus, expect.get("gpu_indices", [0, 1]))
    for index in missing:
        problems.append(record("E_GPU", host, "GPU %d (tensorfold_gpus) is not on this host (it has %s)"
                               % (index, _gpu_list(gpus)), gpu=index))
    for lost in info.get("unreachable") or []:
        problems.append(record(
            "E_GPU", host, "nvidia-smi cannot reach the GPU at PCI %s (%s)" % (lost.get("pci_bus_id"), lost.get("error")),
            "Reboot the host; if the GPU stays unreachable, check the card (dmesg shows its Xid errors) or take it out.",
            pci_bus_id=lost.get("pci_bus_id")))
    pattern = expect.get("model_pattern") or ""
    for gpu in selected:
        if gpu.get("name") is None:
            if not gpu_fault(gpu):  # a GPU that needs a reset or is lost is said below
                problems.append(record(
                    "E_GPU", host, "GPU %d's name cannot be read (nvidia-smi prints %s)"
                    % (gpu["index"], (gpu.get("placeholders") or {}).get("name", "nothing")),
                    "Check the card: nvidia-smi -q -i %d shows what the driver can read of it." % gpu["index"],
                    gpu=gpu["index"]))
        elif not re.search(pattern, gpu["name"]):
            problems.append(record("E_GPU", host, "GPU %d is %s, not a card matching '%s'"
                                   % (gpu["index"], gpu.get("name"), pattern), gpu=gpu["index"]))
        _gpu_state(host, gpu, problems)
    return selected


def _gpu_state(host, gpu, problems):
    """A selected GPU that needs a reset, is lost, or is split into MIG instances cannot hold a rank."""
    index = gpu["index"]
    fault = gpu_fault(gpu)
    if fault and fault[0] == "reset":
        problems.append(record("E_GPU", host, "GPU %d needs a reset (nvidia-smi prints %s)" % (index, fault[1]),
                               "Reset it with nvidia-smi -r -i %d once nothing uses it, or reboot the host." % index,
                               gpu=index))
    elif fault:
        problems.append(record("E_GPU", host, "GPU %d is lost to the driver (nvidia-smi prints %s)" % (index, fault[1]),
                               "Reboot the host; if it is lost again, check the card (dmesg shows its Xid errors).",
                               gpu=index))
    if (gpu.get("mig_mode") or "").lower() == "enabled":
        problems.append(record("E_GPU", host, "GPU %d has MIG mode enabled; a rank needs the whole card" % index,
                               "Turn MIG off with nvidia-smi -i %d -mig 0 (as root), then reset the GPU "
                               "(nvidia-smi -r -i %d) or reboot the host." % (index, index), gpu=index))
    _compute_mode(host, gpu, problems)


def _compute_mode(host, gpu, problems):
    """nvidia-smi's compute mode (``-c``): Prohibited lets no CUDA context onto the card, so its rank
    cannot start; Exclusive_Process lets one process at a time, so any other CUDA process on it
    (a tool, a leftover rank) fails the rank's start with "busy or unavailable"."""
    index, mode = gpu["index"], gpu.get("compute_mode") or ""
    reset = "nvidia-smi -i %d -c DEFAULT (as root)" % index
    if mode.lower() == "prohibited":
        problems.append(record("E_GPU", host, "GPU %d's compute mode is Prohibited: no CUDA process may use it, "
                               "so its rank cannot start" % index, "Set it to Default with %s." % reset, gpu=index))
    elif mode.lower().startswith("exclusive"):
        problems.append(record("W_COMPUTE_MODE", host, "GPU %d's compute mode is %s: one process at a time may use "
                               "it, so its rank fails to start (CUDA: device busy or unavailable) while any other "
                               "CUDA process holds it" % (index, mode),
                               "Set it to Default with %s, unless an MPS server is meant to serve the card." % reset,
                               gpu=index))


def _unread(gpu, fields):
    """``"memory.used and memory.free"`` and what nvidia-smi printed for them, for fields read as None."""
    printed = gpu.get("placeholders") or {}
    texts = sorted(set(printed.get(field) or "no value" for field in fields))
    return " and ".join(fields), ", ".join(texts)


def _driver(host, observed, expect, problems):
    info = observed.get("gpu_info") or {}
    if info.get("failed") or "gpus" not in info:
        return
    driver, cuda = info.get("driver_version"), info.get("cuda_version")
    min_driver, min_cuda = str(expect.get("min_driver", "580")), str(expect.get("min_cuda", "13.0"))
    too_old = not version_at_least(driver, min_driver) or (cuda is not None and not version_at_least(cuda, min_cuda))
    if too_old:
        problems.append(record("E_DRIVER", host, "driver %s (CUDA %s) is older than %s (CUDA %s)"
                               % (driver, cuda or "unknown", min_driver, min_cuda)))


def _gpu_memory(host, selected, expect, problems):
    min_free, max_used = expect.get("min_free_mib", 88000), expect.get("max_used_mib", 4096)
    for gpu in selected:
        # A value that cannot be read is said so, never taken as a pass (a faulty GPU is E_GPU already).
        unread = [field for field, key in (("memory.used", "memory_used_mib"), ("memory.free", "memory_free_mib"))
                  if gpu.get(key) is None]
        if unread and not gpu_fault(gpu):
            fields, printed = _unread(gpu, unread)
            problems.append(record(
                "W_GPU_UNREAD", host, "GPU %d's %s cannot be read (nvidia-smi prints %s), so its memory was not checked"
                % (gpu["index"], fields, printed),
                "Read it as root with nvidia-smi -q -d MEMORY -i %d before the ranks use this GPU." % gpu["index"],
                gpu=gpu["index"], fields=unread))
        free = gpu.get("memory_free_mib")
        if free is not None and free < min_free:
            problems.append(record("E_GPU_MEMORY", host, "GPU %d (%s) has %d MiB free; the ranks need at least %d MiB"
                                   % (gpu["index"], gpu.get("name"), free, min_free), gpu=gpu["index"]))
    for gpu in selected:
        reasons = []
        used = gpu.get("memory_used_mib")
        # The recipe passes a GPU only "under" the limit: exactly max_used is busy.
        if used is not None and used >= max_used:
            reasons.append("uses %d MiB (a GPU must use under %d MiB)" % (used, max_used))
        apps = gpu.get("processes") or []
        if apps:
            reasons.append("runs %s" % ", ".join(_process(p) for p in apps))
        if reasons:
            problems.append(record("E_GPU_BUSY", host, "GPU %d %s" % (gpu["index"], " and ".join(reasons)),
                                   gpu=gpu["index"]))


def _process(app):
    memory = app.get("used_memory_mib")
    return "%s (pid %s, %s)" % (app.get("name") or "a process without a name", app.get("pid") or "unknown",
                                "memory not reported" if memory is None else "%s MiB" % memory)


def _power(host, selected, expect, problems):
    cap = expect.get("power_cap_w")
    if not cap:
        return
    for gpu in selected:
        limit = gpu.get("power_limit_w")
        if limit is None and not gpu_fault(gpu):
            fields, printed = _unread(gpu, ["power.limit"])
            problems.append(record(
                "W_GPU_UNREAD", host, "GPU %d's %s cannot be read (nvidia-smi prints %s), so the %g W cap was not checked"
                % (gpu["index"], fields, printed, cap),
                "Read it with nvidia-smi -q -d POWER -i %d, or set gpu_host_checks_power_cap_w to 0 for this card."
                % gpu["index"], gpu=gpu["index"], fields=["power.limit"]))
        elif limit is not None and limit > cap:
            todo = None
            if (gpu.get("persistence_mode") or "").lower() == "disabled":
                # NVIDIA's Driver Persistence guide: a software power cap lives only while the card is
                # initialized, and without persistence the driver deinitializes it once no process uses it.
                todo = ("Turn persistence mode on first (systemctl enable --now nvidia-persistenced, or nvidia-smi "
                        "-pm 1 as root): without it the card forgets a cap set with nvidia-smi -pl as soon as no "
                        "process uses it. Then cap it with nvidia-smi -i %d -pl %g, or set gpu_host_checks_power_cap_w."
                        % (gpu["index"], cap))
            problems.append(record("W_POWER", host, "GPU %d's power limit is %g W, above %g W%s"
                                   % (gpu["index"], limit, cap, "; its persistence mode is off" if todo else ""),
                                   todo, gpu=gpu["index"]))


def _p2p(host, observed, selected, expect, problems):
    peer = observed.get("peer")
    if not expect.get("p2p", True) or len(selected) < 2 or not peer or peer.get("skipped"):
        return
    if peer.get("failed"):
        problems.append(record("W_P2P", host, "could not read peer-to-peer support: %s" % peer.get("msg")))
        return
    finding = p2p_finding(peer.get("read") or {}, peer.get("write") or {})
    if finding:
        problems.append(record("W_P2P", host, finding[0], finding[1]))


def _resources(host, observed, expect, problems, own_ranks_running):
    resources = observed.get("resources") or {}
    for fs in resources.get("filesystems") or []:
        if not fs.get("ok"):
            # Only what is still missing is named: weights verified in place and a present image need none.
            what = ", ".join("%s at %s (%g GiB)" % (p["name"], p["path"], p["need_gib"])
                             for p in fs["paths"] if p["need_gib"] > 0)
            problems.append(record("E_DISK", host, "%s has %g GiB free; %s need %g GiB there"
                                   % (fs["mount"], fs["free_gib"], what, fs["need_gib"]), path=fs["mount"]))
    available = resources.get("memory_available_mib")
    min_gib = expect.get("min_host_memory_gib", 16)
    if available is not None and available < min_gib * 1024:
        problems.append(record("W_MEMORY", host, "%.1f GiB of host memory is available, below %g GiB"
                               % (available / 1024.0, min_gib)))
    if own_ranks_running:
        return  # the recipe's own container holds the ports
    for port in resources.get("ports") or []:
        if not port.get("free"):
            problems.append(record("E_PORT", host, port.get("why") or "port %s is not free" % port.get("port"),
                                   port=port.get("port")))


def host_problems(host, observed, expect, toolkit_follows=False):
    """Every problem of one host as records, in the recipe's order of checks.

    ``observed``: system, architecture, user, tools, docker {ok, error, runtimes, groups,
    own_container_running}, gpu_info (the module's result), peer (gpu_peer_info's result or
    None), resources (host_resources' result). ``expect``: gpu_count, gpu_indices, model_pattern,
    min_driver, min_cuda, min_free_mib, max_used_mib, power_cap_w, p2p, docker,
    min_host_memory_gib.

    When the recipe's own container already runs on the host, the GPU memory, busy and port checks
    are left out: its ranks are what holds them. With ``toolkit_follows`` (the nvidia_toolkit step
    runs on the box later in this run) the docker group is judged even when Docker is missing, and
    checks that ran as a user other than root are E_SETTINGS, with Docker and the ports left
    unjudged (as that user they cannot be judged for the steps, which run as root).
    """
    problems = []
    own_ranks_running = bool((observed.get("docker") or {}).get("own_container_running"))
    _platform(host, observed, problems)
    _tools(host, observed, problems)
    # The deploy steps after the checks run as root. Checks run as another user (a login without
    # become) see Docker's socket and the engine's ports as that user would: "permission denied"
    # read as no Docker, a docker group to join, the serving engine's port as taken. One problem
    # says what to set instead; the next run judges those parts as root.
    as_root = (observed.get("user") or "root") == "root"
    if toolkit_follows and not as_root:
        problems.append(record(
            "E_SETTINGS", host, "the checks ran as user %s, not root, and the deploy steps after them must run as root "
            "(packages, files under /etc, Docker)" % observed["user"],
            "Set ansible_become: true for the host (sudo, with ansible_become_password or a NOPASSWD rule), "
            "or connect as root; Docker and the ports are judged then."))
    else:
        _docker(host, observed, expect, problems, toolkit_follows)
    selected = _gpus(host, observed, expect, problems)
    _driver(host, observed, expect, problems)
    if not own_ranks_running:
        _gpu_memory(host, selected, expect, problems)
    _power(host, selected, expect, problems)
    _p2p(host, observed, selected, expect, problems)
    _resources(host, observed, expect, problems, own_ranks_running or (toolkit_follows and not as_root))
    return problems


def status(problems):
    """``fail`` when any problem is an error, ``warn`` when only warnings, else ``pass``."""
    severities = set(p.get("severity") for p in problems)
    if "error" in severities:
        return "fail"
    return "warn" if severities else "pass"


def _codes(problems):
    """The problems' codes, each once, in their order."""
    codes = []
    for entry in problems or []:
        if entry["code"] not in codes:
            codes.append(entry["code"])
    return codes


def summary_line(host, result):
    """One line of the fleet summary: ``host: pass`` / ``host: warnings (W_P2P)`` / ``host: FAIL (E_GPU,
    W_P2P)``, and what was left to the toolkit step: ``host: left to the toolkit step (E_NVIDIA_RUNTIME)``."""
    if not result:
        return "%s: FAIL (no result: the host was unreachable or failed before the checks)" % host
    codes, left = _codes(result.get("problems")), _codes(result.get("left_to_toolkit"))
    word = {"pass": "pass", "warn": "warnings", "fail": "FAIL"}.get(result.get("status"), result.get("status"))
    parts = [] if left and not codes else ["%s%s" % (word, " (%s)" % ", ".join(codes) if codes else "")]
    if left:
        parts.append("left to the toolkit step (%s)" % ", ".join(left))
    return "%s: %s" % (host, "; ".join(parts))


def verdict(host, resources, gpu_info, expect, toolkit_follows=False):
    """One host's verdict from host_resources' answer and gpu_info's (host_resources' own
    ``gpu_info`` when it was asked with ``gpus``): ``{status, problems, left_to_toolkit, gpus}``,
    ``gpus`` being the checked GPUs in rank order (those the host has). An expectation that is None
    (the action's typed spec fills each one left out so) takes its default.

    With ``toolkit_follows`` (the nvidia_toolkit step runs on this box later in this run), what that
    step fixes is ``left_to_toolkit`` (``leave_to_toolkit``): no longer an error of the box, a
    warning (status ``warn``) that says so."""
    expect = dict((key, value) for key, value in (expect or {}).items() if value is not None)
    observed = observe(resources, gpu_info)
    problems = host_problems(host, observed, expect, toolkit_follows)
    left = []
    if toolkit_follows:
        problems, left = leave_to_toolkit(host, problems)
    gpus = select((observed["gpu_info"] or {}).get("gpus") or [], expect.get("gpu_indices", [0, 1]))[0]
    state = status(problems)
    return {"status": "warn" if left and state == "pass" else state, "problems": problems,
            "left_to_toolkit": left, "gpus": gpus}


def shown(result, fail):
    """How a verdict reaches the operator, in the task that judged it: with ``fail`` and an error,
    the task fails with every problem's message (``failed``, ``msg``); otherwise each problem is a
    warning under the task (``warnings``). Nothing when the host has no problem."""
    messages = [entry["message"] for entry in (result.get("problems") or []) + (result.get("left_to_toolkit") or [])]
    if fail and result.get("status") == "fail":
        return {"failed": True, "msg": messages}
    return {"warnings": messages} if messages else {}


def judged(result):
    """The verdict when ``result`` is one (it has a ``status``), else None: a host whose read failed
    before it was judged has a registered result without one."""
    return result if isinstance(result, dict) and result.get("status") in ("pass", "warn", "fail") else None


def fleet_summary(results):
    """The fleet report from ``{host: gpu_host_checks_result or None}``, hosts in the given order.

    Returns ``{lines, hosts: {host: {status, codes, problems, left_to_toolkit}}, counts: {pass, warn, fail}}``
    (``left_to_toolkit``: the codes left to the toolkit step).
    """
    lines, hosts, counts = [], {}, {"pass": 0, "warn": 0, "fail": 0}
    if isinstance(results, dict):
        results = list(results.items())
    for host, result in results:
        result = judged(result)
        lines.append(summary_line(host, result))
        state = (result or {}).get("status", "fail")
        counts[state] = counts.get(state, 0) + 1
        problems = (result or {}).get("problems") or []
        hosts[host] = {
            "status": state,
            "codes": sorted(set(p["code"] for p in problems)) if result else ["NO_RESULT"],
            "problems": [p["message"] for p in problems],
            "left_to_toolkit": _codes((result or {}).get("left_to_toolkit")),
        }
    return {"lines": lines, "hosts": hosts, "counts": counts}
