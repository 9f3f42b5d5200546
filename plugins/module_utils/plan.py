# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The dry-run plan: what a run would do on one host, the way the recipe's ``DRY_RUN=1 ./start.sh``
printed it (image and build, downloads, both rank command lines, the docker run, the smoke
requests).

Everything here is derived from the recipe's settings (the ``tensorfold_*`` variables), the
public facts of the roles that ran before in check mode (image ref, model path, revision, GPU
UUIDs) and what the plan's own read-only look at the host found (image present, folders
present). Nothing is assumed: what is not known is printed as not known.

The ranks' command lines, their environment and the key's file mount come from
``engine_args`` (the one builder the runner script and the engine's argument check use too), so
the plan's rank lines are the argv the engine receives.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args
from ansible_collections.glm53.tensorfold.plugins.module_utils.net import api_host, url_host
from ansible_collections.glm53.tensorfold.plugins.module_utils.settings import MAX_CONTEXT, parse_context
from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import smoke_requests

# Sizes the recipe states (about 164 GiB checkpoint, 10 GiB drafter), used only when the Hub was not asked.
ABOUT_GIB = {"model": 164, "ablit": 164, "drafter": 10}
ENGINE = engine_args.ENGINE
ENGINE_BUILD = ("zig build -Dnvcc=/usr/local/cuda/bin/nvcc -Doptimize=fast -Dsm=120 "
                "--prefix /opt/tensorfold fatbins install native")
MODEL_MOUNT = engine_args.MODEL_MOUNT
DRAFTER_MOUNT = engine_args.DRAFTER_MOUNT
LOG_MOUNT = engine_args.LOG_MOUNT


def _flag(value):
    return str(value).lower() in ("1", "true", "yes", "on")


def _key_set(settings):
    """Whether an API key is configured; callers may pass only ``tensorfold_api_key_set``."""
    return bool(settings.get("tensorfold_api_key")) or _flag(settings.get("tensorfold_api_key_set", False))


def first_context(settings, cached=None):
    """The window the first start asks for: the setting, a cached fit, or the recipe's 1,048,576."""
    context = parse_context(settings.get("tensorfold_context", "auto"))
    if context == "auto":
        return int(cached) if cached else MAX_CONTEXT
    return context


def rank_argv(settings, rank, model_path=MODEL_MOUNT, drafter_path=DRAFTER_MOUNT, context=None):
    """The engine's command line for one rank (a list), from the one builder the runner uses.

    The API key never appears: rank 0 reads it from a mode-0600 file (its path only).
    """
    s = settings
    return engine_args.rank_argv(s, rank, context if context is not None else first_context(s), model_path, drafter_path,
                                 engine_args.API_KEY_MOUNT if _key_set(s) else None,
                                 s.get("rank_container_engine_args") or ())


def engine_env(settings):
    """The environment of both ranks, as the runner exports it (cards listed separately)."""
    env = engine_args.runner_env(settings, "<the two cards in rank order>")
    del env["CUDA_VISIBLE_DEVICES"]
    return env


def gpu_devices(settings, gpus_facts=None):
    """The cards in rank order, as the start asks for them (engine_args.pin_cards): UUIDs when the
    host checks found them, else nvidia-smi indices."""
    return engine_args.pin_cards(settings.get("tensorfold_gpus", [0, 1]), gpus_facts)["device_ids"]


def docker_run(settings, image_ref, model_path, drafter_path, log_dir, gpus_facts=None):
    """The ``docker run`` of the recipe's container, as one shell-quoted line: the argv the
    engine_container module runs (engine_args.container_run_argv, the rank_container_* settings of
    the container), with what only the start knows (the settings fingerprint, the window) in <>,
    and the restart policy the container gets once its API answers."""
    s = settings
    data = str(s.get("tensorfold_data_dir", "/srv/glm53")).rstrip("/")
    label = str(s.get("rank_container_label", "glm53.tensorfold.rank_container"))
    labels = ((label, "true"), (label + ".settings", "<settings fingerprint>"), (label + ".context", "<window>"))
    devices = gpu_devices(s, gpus_facts) if _flag(s.get("rank_container_gpu_requests", True)) else None
    mounts = engine_args.container_mounts(model_path, s.get("rank_container_cache_dir") or data + "/.cache", log_dir,
                                          drafter_path, data + "/.state/api-key" if _key_set(s) else None)
    argv = ["docker"] + engine_args.container_run_argv(
        str(s.get("tensorfold_container_name", "glm53-zig")), image_ref or "<image ref: computed by tensorfold_image>",
        s.get("rank_container_env") or {}, s.get("rank_container_ulimits") or ["memlock:-1:-1", "stack:67108864:67108864"],
        labels, devices, mounts)
    line = " ".join(a if a.startswith("<") else shlex.quote(a) for a in argv)
    policy = str(s.get("rank_container_restart_policy", "on-failure:3"))
    return line + ("; once the API answers: docker update --restart %s %s" % (policy, argv[argv.index("--name") + 1])
                   if policy != "no" else "")


def downloads(settings, present=None, drafter_path=None):
    """What a run would download: a list of dicts (what, repo, revision, dest, about_gib, needed)."""
    s, present = settings, present or {}
    data = str(s.get("tensorfold_data_dir", "/srv/glm53")).rstrip("/")
    out = []
    if s.get("tensorfold_model_source", "download") == "download":
        if _flag(s.get("tensorfold_ablit", False)):
            out.append({"what": "checkpoint (Ablit, gated)", "repo": s.get("tensorfold_ablit_repo"),
                        "revision": s.get("tensorfold_ablit_revision"), "dest": data + "/model-ablit",
                        "about_gib": ABOUT_GIB["ablit"], "needed": not present.get("model")})
        else:
            out.append({"what": "checkpoint", "repo": s.get("tensorfold_model_repo"),
                        "revision": s.get("tensorfold_model_revision"), "dest": data + "/model",
                        "about_gib": ABOUT_GIB["model"], "needed": not present.get("model")})
    if s.get("tensorfold_drafter", "dflash2") == "dflash2":
        out.append({"what": "DFlash2 drafter (non-commercial licence)", "repo": s.get("tensorfold_drafter_repo"),
                    "revision": s.get("tensorfold_drafter_revision"), "dest": drafter_path or data + "/drafter",
                    "about_gib": ABOUT_GIB["drafter"], "needed": not present.get("drafter")})
    return out


def plan_lines(settings, facts):
    """The plan for one host, as printable lines.

    ``facts`` holds what is known: ``image_ref``, ``image_present`` (True/False/None = not
    known), ``image_note``, ``model_path``, ``drafter_path``, ``model_present``,
    ``drafter_present``, ``gpus`` (gpu_host_checks_gpus), ``cached_context``, ``smoke_url``,
    ``max_tokens``.
    """
    s, f = settings, facts
    data = str(s.get("tensorfold_data_dir", "/srv/glm53")).rstrip("/")
    lines = []
    ref = f.get("image_ref")
    if not ref:
        lines.append("image: not known (the tensorfold_image role computes the content-hash tag; it did not run)")
    else:
        present = f.get("image_present")
        if not isinstance(present, bool):
            present = {"true": True, "false": False}.get(str(present).strip().lower())
        would = {True: "present, no build", False: "missing, would build", None: "not known whether present"}[present]
        lines.append("image: %s (%s)%s" % (ref, would, (" - " + f["image_note"]) if f.get("image_note") else ""))
        if present is not True:
            lines.append("build: DOCKER_BUILDKIT=1 docker build --tag %s <tensorfold_image's build folder>" % ref)
            lines.append("  engine build inside it: %s" % ENGINE_BUILD)
    for item in downloads(s, {"model": f.get("model_present"), "drafter": f.get("drafter_present")},
                          f.get("drafter_path")):
        state = "would download about %d GiB" % item["about_gib"] if item["needed"] else "present, no download"
        lines.append("download: %s %s@%s -> %s: %s" % (item["what"], item["repo"], item["revision"], item["dest"], state))
    if s.get("tensorfold_model_source") == "local":
        lines.append("checkpoint: %s served as it is (tensorfold_model_source: local)" % s.get("tensorfold_model_dir"))
    context = first_context(s, f.get("cached_context"))
    if parse_context(s.get("tensorfold_context", "auto")) == "auto":
        lines.append("context: auto, first start asks for %d tokens%s" % (
            context, " (cached fit)" if f.get("cached_context") else "; on a fit refusal it starts once more at the window that fits"))
    devices = gpu_devices(s, f.get("gpus"))
    for rank in (1, 0):
        where = "background" if rank == 1 else "front"
        command = " ".join(shlex.quote(a) for a in rank_argv(s, rank, context=context))
        lines.append("rank %d (GPU %s, %s): %s" % (rank, devices[rank] if rank < len(devices) else "?", where, command))
    model_path = f.get("model_path") or (s.get("tensorfold_model_dir") if s.get("tensorfold_model_source") == "local"
                                         else data + ("/model-ablit" if _flag(s.get("tensorfold_ablit")) else "/model"))
    drafter_path = f.get("drafter_path")
    if drafter_path is None and s.get("tensorfold_drafter", "dflash2") == "dflash2":
        drafter_path = data + "/drafter"
    lines.append("ranks' environment (runner.sh exports it): %s" % " ".join(
        "%s=%s" % (k, shlex.quote(v)) for k, v in sorted(engine_env(s).items())))
    lines.append("engine names: %s" % engine_args.unconfirmed_note(s))
    lines.append("docker run: %s" % docker_run(s, ref, model_path, drafter_path, data + "/logs/current", f.get("gpus")))
    api = url_host(api_host(s.get("tensorfold_host", "0.0.0.0")))
    url = f.get("smoke_url") or "http://%s:%s" % (api, s.get("tensorfold_port", 8020))
    for request in smoke_requests(url, s.get("tensorfold_served_name", "GLM-5.3-Flash"), _flag(s.get("tensorfold_vision", True)),
                                  _key_set(s), f.get("max_tokens", 32)):
        lines.append("smoke: %s" % request)
    return lines
