# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Checks on the recipe's settings that need no host: ranges and settings that depend on each
other. Types and choices come from each role's argument_specs (settings_spec.py checks both in one
pass, before Ansible's own check). Every problem names the host, the setting and what to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record

MAX_CONTEXT = 1048576
MIN_CONTEXT = 512
MAX_PARALLEL = 8
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")


def _int_or_none(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^[0-9]+$", value.strip()):
        return int(value.strip())
    return None


def parse_parallel(value):
    """Return "auto" or an int, or None when the value is neither."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return _int_or_none(value)


def parse_context(value):
    """Return "auto" or an int, or None when the value is neither."""
    return parse_parallel(value)


def check_settings(settings, host):
    """Return a list of problem records (see codes.record) for the settings dict.

    ``settings`` maps the tensorfold_* variable names to their values; missing names are
    skipped, so a role can check the part it uses.
    """
    problems = []

    def bad(name, what, todo):
        problems.append(record("E_SETTINGS", host, "%s %s" % (name, what), todo, setting=name))

    def has(name):
        return name in settings

    for name in ("tensorfold_model_revision", "tensorfold_ablit_revision", "tensorfold_drafter_revision"):
        if has(name) and not _HEX40.match(str(settings[name] or "")):
            bad(name, "is %r, not a full 40-hex commit" % (settings[name],),
                "Pin the repository's commit (the 40-hex id on its Hugging Face page); branches and tags move.")

    source = settings.get("tensorfold_model_source", "download")
    if source == "local":
        model_dir = str(settings.get("tensorfold_model_dir") or "")
        if not model_dir:
            bad("tensorfold_model_dir", "is empty while tensorfold_model_source is local",
                "Set it to the checkpoint folder to serve, or use tensorfold_model_source: download.")
        elif not model_dir.startswith("/"):
            bad("tensorfold_model_dir", "is %r, not an absolute path" % model_dir,
                "Give the checkpoint folder's absolute path on the host.")
        if settings.get("tensorfold_ablit"):
            bad("tensorfold_ablit", "is true while tensorfold_model_source is local",
                "Ablit weights are downloaded; to serve a local Ablit checkpoint set "
                "tensorfold_ablit: false and point tensorfold_model_dir at it.")
    # No token is required here: Ablit weights verified in place serve without one (the recipe's
    # way); weights_fetch asks for it only when gated files must still be downloaded (E_HF_TOKEN).

    if has("tensorfold_gpus"):
        gpus = settings["tensorfold_gpus"]
        ints = [g for g in (gpus or []) if _int_or_none(g) is not None and _int_or_none(g) >= 0]
        if not isinstance(gpus, (list, tuple)) or len(gpus) != 2 or len(ints) != 2:
            bad("tensorfold_gpus", "is %r; the recipe runs two ranks, one per GPU" % (gpus,),
                "List exactly two GPU indices in rank order, such as [0, 1] or [1, 0].")
        elif int(ints[0]) == int(ints[1]):
            bad("tensorfold_gpus", "names GPU %s twice" % ints[0], "List two different GPU indices.")

    if has("tensorfold_parallel"):
        parallel = parse_parallel(settings["tensorfold_parallel"])
        if parallel is None or (parallel != "auto" and not 1 <= parallel <= MAX_PARALLEL):
            bad("tensorfold_parallel", "is %r" % (settings["tensorfold_parallel"],),
                "Use a number of streams from 1 to %d, or auto." % MAX_PARALLEL)

    if has("tensorfold_context"):
        context = parse_context(settings["tensorfold_context"])
        if context is None or (context != "auto" and not MIN_CONTEXT <= context <= MAX_CONTEXT):
            bad("tensorfold_context", "is %r" % (settings["tensorfold_context"],),
                "Use a window from %d to %d tokens, or auto (the largest that fits)." % (MIN_CONTEXT, MAX_CONTEXT))

    if has("tensorfold_memory_reserve_gib"):
        try:
            reserve = float(settings["tensorfold_memory_reserve_gib"])
        except (TypeError, ValueError):
            reserve = -1.0
        if not 0 <= reserve < 96:
            bad("tensorfold_memory_reserve_gib", "is %r" % (settings["tensorfold_memory_reserve_gib"],),
                "Use GiB per GPU from 0 to below the card's memory; the recipe's default is 4 (3.5 fits four streams on pages).")

    if has("tensorfold_max_tokens"):
        value = _int_or_none(settings["tensorfold_max_tokens"])
        if value is None or value < 1:
            bad("tensorfold_max_tokens", "is %r" % (settings["tensorfold_max_tokens"],), "Use a positive number of tokens.")

    ports = {}
    for name in ("tensorfold_port", "tensorfold_nccl_port"):
        if has(name):
            value = _int_or_none(settings[name])
            top = 65534 if name == "tensorfold_nccl_port" else 65535
            if value is None or not 1 <= value <= top:
                bad(name, "is %r" % (settings[name],), "Use a TCP port from 1 to %d." % top)
            else:
                ports[name] = value
    if len(ports) == 2 and ports["tensorfold_port"] in (ports["tensorfold_nccl_port"], ports["tensorfold_nccl_port"] + 1):
        bad("tensorfold_port", "is %d, which the ranks use (tensorfold_nccl_port %d and the next one)"
            % (ports["tensorfold_port"], ports["tensorfold_nccl_port"]),
            "Give the API and the ranks different ports.")

    if has("tensorfold_wait_timeout"):
        value = _int_or_none(settings["tensorfold_wait_timeout"])
        if value is None or value < 30:
            bad("tensorfold_wait_timeout", "is %r" % (settings["tensorfold_wait_timeout"],),
                "Use at least 30 seconds; the first start hashes every shard and needs far more (2400 by default).")

    if has("tensorfold_data_dir") and not str(settings["tensorfold_data_dir"] or "").startswith("/"):
        bad("tensorfold_data_dir", "is %r, not an absolute path" % (settings["tensorfold_data_dir"],),
            "Give an absolute folder on the host, such as /srv/glm53.")

    if has("tensorfold_container_name") and not _CONTAINER_NAME.match(str(settings["tensorfold_container_name"] or "")):
        bad("tensorfold_container_name", "is %r, not a valid container name" % (settings["tensorfold_container_name"],),
            "Use letters, digits, '_', '.' and '-'.")

    key = str(settings.get("tensorfold_api_key") or "")
    if key and (re.search(r"[\s,]", key) or len(key) < 8):
        # The value itself is never echoed: it is a secret.
        bad("tensorfold_api_key", "has white space or a comma, or is shorter than 8 characters",
            "Use one key of at least 8 characters without spaces or commas (the engine splits keys on commas).")

    return problems
