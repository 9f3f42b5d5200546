# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Checks on the recipe's settings that need no host: ranges and settings that depend on each
other. Types and choices come from each role's argument_specs (settings_spec.py checks both in one
pass, before Ansible's own check). Every problem names the host, the setting and what to do."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import math
import posixpath
import re

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args, gateway
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record

MAX_CONTEXT = 1048576
MIN_CONTEXT = 512
MAX_PARALLEL = 8
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_CONTAINER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
# A Hugging Face repository id, owner/name (what huggingface_hub accepts, owner required).
_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Docker's reference grammar: lowercase path components of [a-z0-9] joined by ".", "_", "__" or
# dashes, after an optional registry host[:port]; a tag; a digest.
_IMAGE_PATH = re.compile(r"^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$")
_IMAGE_DOMAIN = re.compile(r"^(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
                           r"(?:\.(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]))*(?::[0-9]+)?$")
_IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_IMAGE_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")
# The boolean forms that Ansible's argument check, its bool filter and engine_args._flag all read
# the same way (case aside); "y", "t", " yes" and 1.0 are read differently by one of them.
BOOL_FORMS = ("true", "false", "yes", "no", "on", "off", "1", "0")
_PLAIN_INT = re.compile(r"^-?[0-9]+$")
_PLAIN_DECIMAL = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?$")
# NVIDIA's package versions, VERSION-RELEASE (1.18.2-1, 1.19.0~rc.1-1), as the toolkit role pins them.
_TOOLKIT_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(~rc\.[0-9]+)?-[0-9]+$")
# The gateway's settings that settings_problems of module_utils/gateway.py reads as integers.
_GATEWAY_INTS = ("gateway_check_interval", "gateway_check_timeout", "gateway_check_fastinter_ms", "gateway_check_fall",
                 "gateway_port", "gateway_stats_port", "tensorfold_port")
# The resources docker run's --ulimit takes (Docker's go-units ulimit table), and the restart
# policies docker update --restart takes (on-failure with an optional retry count).
DOCKER_ULIMITS = ("core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss",
                  "rtprio", "rttime", "sigpending", "stack")
_RESTART_POLICY = re.compile(r"^(?:no|always|unless-stopped|on-failure(?::[0-9]+)?)$")
# Characters a host folder may not hold: ":" and "," split docker's -v and --mount specs, '"'
# quotes in --mount, "$" and control characters are read differently by shells and Ansible.
_BAD_PATH_CHARS = re.compile(r'[:,"$\x00-\x1f\x7f]')


def _int_or_none(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r"^[0-9]+$", value.strip()):
        return int(value.strip())
    return None


def plain_int(value):
    """The int of an int or a string of ASCII digits (optional "-"), else None: the forms that
    Python's int(), Jinja's int filter and Ansible's argument check read alike ("8020.0", " 8020",
    "1_000", True and 8020.0 are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _PLAIN_INT.fullmatch(value):
        return int(value)
    return None


def plain_number(value):
    """The float of a finite int/float or a plain decimal string ("3.5"), else None: the engine
    gets the raw text, so no exponent, spaces, nan or true/false."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _PLAIN_DECIMAL.fullmatch(value):
        return float(value)
    return None


def plain_bool(value):
    """True or False for a boolean every reader takes the same way (BOOL_FORMS, 0, 1 or a real
    boolean), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in BOOL_FORMS:
        return value.lower() in ("true", "yes", "on", "1")
    return None


def image_name_problem(value, with_tag=False):
    """What is wrong with an image reference by Docker's grammar, or None. ``with_tag``: a tag or
    a digest may follow the name (a full reference); else the name alone."""
    if not isinstance(value, str) or not value:
        return "is empty or not text"
    name, digest = value, None
    if with_tag and "@" in name:
        name, digest = name.split("@", 1)
        if not _IMAGE_DIGEST.fullmatch(digest):
            return "has a malformed digest after '@'"
    if with_tag and ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
        if not _IMAGE_TAG.fullmatch(tag):
            return "has a tag Docker refuses (letters, digits, '_', '.' and '-', 128 at most)"
    elif not with_tag and (":" in value.rsplit("/", 1)[-1] or "@" in value):
        return "has a tag or digest; the role adds its own tag"
    parts = name.split("/")
    # The first part is a registry host only when it looks like one (Docker's own rule).
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        if not _IMAGE_DOMAIN.fullmatch(parts[0]):
            return "has a malformed registry host"
        parts = parts[1:]
    if len(name) > 255 or not all(_IMAGE_PATH.fullmatch(part) for part in parts):
        return "is not a Docker image name (lowercase [a-z0-9] parts joined by '.', '_', '__' or '-', '/' between parts)"
    return None


def reserved_engine_names():
    """(flags, environment variables) the collection sets itself on the ranks, read off
    engine_args' own builders, so a tensorfold_engine_names entry cannot take one over."""
    flags = set()
    for settings in ({}, {"tensorfold_drafter": "none", "tensorfold_thinking": True}):
        argv = engine_args.rank_argv(settings, 0, MIN_CONTEXT, api_key_file="/key") + engine_args.rank_argv(settings, 1, MIN_CONTEXT)
        flags.update(arg for arg in argv if arg.startswith("--"))
    for row in engine_args.CONFIRMED:
        flags.update(re.findall(r"--[a-z0-9][a-z0-9-]*", row[2]))
    knob_defaults = set(spec[0] for spec in engine_args.UNCONFIRMED.values())
    env = set(engine_args.runner_env({}, "0,1")) - knob_defaults
    env.update(re.findall(r"^unset (\w+)", engine_args.RUNNER, re.M))
    return frozenset(flags), frozenset(env)


def _host_path_problem(value):
    """What is wrong with a folder given for the host, checked as written (the host gets the raw
    text: "~" and "$HOME" are not expanded there), or None."""
    if not isinstance(value, str) or not value.startswith("/"):
        return "is %r, not an absolute path (it must start with /; ~ and $VARS are not expanded on the host)" % (value,)
    if _BAD_PATH_CHARS.search(value):
        return "is %r, which holds a character docker's mounts or the shell split on (: , \" $ or a control character)" % (value,)
    if posixpath.normpath(value).strip("/") == "":
        return "is the root folder /"
    return None


def serial_ok(value):
    """Whether Ansible's play keyword serial takes ``value`` as intended: a count of 1 or more, a
    percentage "N%" with N from 1 to 100, or a non-empty list of those (0 or less means every
    host at once; "abc" and "2.5" fail the play)."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(not isinstance(item, (list, tuple)) and serial_ok(item) for item in value)
    if isinstance(value, str) and value.endswith("%"):
        percent = plain_int(value[:-1])
        return percent is not None and 1 <= percent <= 100
    count = plain_int(value)
    return count is not None and count >= 1


def _is_ip(value):
    if not isinstance(value, str):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def ulimit_problem(value):
    """What is wrong with one rank_container_ulimits entry as engine_args.container_run_argv reads
    it (NAME:SOFT:HARD, three parts), or None: a resource docker knows, whole numbers (-1 for
    unlimited), the soft limit no higher than the hard one."""
    parts = value.split(":") if isinstance(value, str) else []
    if len(parts) != 3:
        return "%r, which is not NAME:SOFT:HARD" % (value,)
    name, soft, hard = parts[0], plain_int(parts[1]), plain_int(parts[2])
    if name not in DOCKER_ULIMITS:
        return "%r, which names %r, no resource docker's --ulimit takes" % (value, name)
    if soft is None or hard is None or soft < -1 or hard < -1:
        return "%r, with a limit that is not a whole number (-1 for unlimited)" % (value,)
    if hard != -1 and (soft == -1 or soft > hard):
        return "%r, with a soft limit above its hard one" % (value,)
    return None


def engine_names_problems(overrides):
    """What is wrong with a tensorfold_engine_names mapping, as engine_args reads it: a bad name,
    a name the collection sets itself, or one name for two knobs."""
    empty = [knob for knob in sorted(overrides) if not isinstance(overrides[knob], str) or not overrides[knob]]
    if empty:
        # engine_args would read None as the variable "None".
        return [".%s is empty or not text" % knob for knob in empty]
    try:
        names = engine_args.engine_names(overrides)
    except ValueError as error:
        return [str(error).replace("tensorfold_engine_names", "", 1).lstrip(" ")]
    flags, env = reserved_engine_names()
    found = []
    for knob in sorted(overrides):
        name = names.get(knob)
        if name in flags or name in env:
            found.append(".%s is %s, which the collection itself passes to (or clears on) the ranks" % (knob, name))
    taken = {}
    for knob in sorted(names):
        taken.setdefault(names[knob], []).append(knob)
    for name, knobs in sorted(taken.items()):
        if len(knobs) > 1:
            found.append("gives %s to %s" % (name, " and ".join(knobs)))
    return found


def parse_parallel(value):
    """Return "auto" or an int, or None when the value is neither."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return _int_or_none(value)


def parse_context(value):
    """Return "auto" or an int, or None when the value is neither."""
    return parse_parallel(value)


# Ports that 0 turns off (the gateway's stats page); the NCCL port's next one is used too.
PORTS_OFF_AT_ZERO = ("gateway_stats_port",)
# What listens on a GPU box, by the setting that gives its port: the API, the ranks' two NCCL ports,
# the weights' seed while peers copy, the image's build host while others load it, and the node
# exporter (where it is deployed). Two of them on one port fail the later one's bind.
BOX_PORTS = ("tensorfold_port", "tensorfold_nccl_port", "weights_fetch_peer_port", "tensorfold_image_move_port",
             "monitoring_node_exporter_port")


def _port_problems(settings, host, groups, defaults):
    """Every ``*_port`` setting given is a TCP port (0 too where it turns the thing off); the ports a
    GPU box listens on (BOX_PORTS, the defaults of those not given) are all different."""
    found = []

    def bad(name, what, todo):
        found.append(record("E_SETTINGS", host, "%s %s" % (name, what), todo, setting=name))

    ports = {}
    for name in sorted(settings):
        if not name.endswith("_port"):
            continue
        value = plain_int(settings[name])
        low = 0 if name in PORTS_OFF_AT_ZERO else 1
        top = 65534 if name == "tensorfold_nccl_port" else 65535
        if value is None or not low <= value <= top:
            bad(name, "is %r" % (settings[name],), "Use a TCP port from %d to %d%s%s." % (
                low, top, " (0 turns it off)" if low == 0 else "", ", written with digits only" if value is None else ""))
        else:
            ports[name] = value
    given = dict((name, plain_int(defaults.get(name))) for name in BOX_PORTS)
    given.update((name, ports.get(name)) for name in BOX_PORTS if name in settings)
    exporter = plain_bool(settings.get("monitoring_node_exporter", defaults.get("monitoring_node_exporter", True)))
    if not exporter or (groups is not None and not groups.get("monitoring")):
        given.pop("monitoring_node_exporter_port")
    uses = []  # (port, setting, whether it is the port after the setting's), in BOX_PORTS' order
    for name in BOX_PORTS:
        if given.get(name) is not None:
            uses += [(given[name], name, False)] + ([(given[name] + 1, name, True)] if name == "tensorfold_nccl_port" else [])
    for index, (port, name, after) in enumerate(uses):
        other = next((use for use in uses[:index] if use[0] == port and use[1] != name), None)
        if other is None or (name not in settings and other[1] not in settings):
            continue
        # Named after a setting given (a default is not what the operator changes), the NCCL pair's last.
        ours = name in settings and not (name == "tensorfold_nccl_port" and other[1] in settings)
        (named, named_after), (rest, rest_after) = ((name, after), other[1:]) if ours else (other[1:], (name, after))
        value = port - 1 if named_after else port
        what = "is %d, and the port after it (%d)" % (value, port) if named_after else "is %d, which" % port
        bad(named, "%s is also %s: both listen on the box" % (what, "the port after %s" % rest if rest_after else rest),
            "Give each port a GPU box listens on its own: %s, and the port after tensorfold_nccl_port." % ", ".join(BOX_PORTS))
    return found


def _inventory_problems(settings, host, groups, defaults):
    """check_settings' part that reads the inventory's groups (see there)."""
    found = []
    build_host = settings.get("tensorfold_image_build_host")
    # The role alone may run on an inventory without gpu_hosts: then any host of it.
    boxes = groups["gpu_hosts"] if "gpu_hosts" in groups else groups.get("all") or []
    if isinstance(build_host, str) and build_host and build_host not in boxes:
        found.append(record("E_SETTINGS", host, "tensorfold_image_build_host is %r, which is not a host of the "
                            "inventory's gpu_hosts" % (build_host,),
                            "Name a GPU box of the inventory, or leave it empty (a box that has the image builds for "
                            "the others, else the first).", setting="tensorfold_image_build_host"))
    if host in (groups.get("gateways") or ()):
        given = dict(defaults)
        given.update(settings)
        texts = ("gateway_bind", "gateway_stats_bind", "gateway_fleet_group", "tensorfold_host")
        read = dict((name, given.get(name)) for name in texts)
        read.update((name, plain_int(given.get(name))) for name in _GATEWAY_INTS)
        found += [record("E_SETTINGS", host, what, todo, setting=name)
                  for name, what, todo in gateway.settings_problems(host, read, groups)]
    return found


def check_settings(settings, host, groups=None, defaults=None):
    """Return a list of problem records (see codes.record) for the settings dict.

    ``settings`` maps the settings' names to their values; missing names are skipped, so a role
    can check the part it uses. ``groups``: the inventory's groups ({group: [host, ...]}), for
    the settings that name hosts or hold for a host by its group (the image's build host, a
    gateway's); None leaves those checks out. ``defaults``: the roles' defaults, for a gateway's
    rules that bind settings it may leave at their default (a longer check timeout alone must
    still fit the default interval).
    """
    problems = []

    def bad(name, what, todo):
        # "name.knob ..." for a part of a mapping, "name is ..." otherwise.
        problems.append(record("E_SETTINGS", host, "%s%s%s" % (name, "" if what.startswith(".") else " ", what),
                               todo, setting=name))

    def has(name):
        return name in settings

    for name in ("tensorfold_model_revision", "tensorfold_ablit_revision", "tensorfold_drafter_revision"):
        if has(name) and not _HEX40.fullmatch(str(settings[name] or "")):
            bad(name, "is %r, not a full 40-hex commit" % (settings[name],),
                "Pin the repository's commit (the 40-hex id on its Hugging Face page); branches and tags move.")

    for name in ("tensorfold_model_repo", "tensorfold_ablit_repo", "tensorfold_drafter_repo"):
        value = settings.get(name)
        if has(name) and not (isinstance(value, str) and _HF_REPO.fullmatch(value) and len(value) <= 96
                              and "--" not in value and ".." not in value):
            bad(name, "is %r, not a Hugging Face repository id" % (value,),
                "Give it as owner/name, such as Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold (letters, digits, '_', '.', '-').")

    if has("tensorfold_hf_endpoint"):
        endpoint = settings["tensorfold_hf_endpoint"]
        if not (isinstance(endpoint, str) and re.fullmatch(r"https?://[^\s/?#]+(?:/\S*)?", endpoint)):
            bad("tensorfold_hf_endpoint", "is %r, not an http(s) URL" % (endpoint,),
                "Give the Hub or its mirror with its scheme and no spaces, such as https://huggingface.co.")

    source = settings.get("tensorfold_model_source", "download")
    if source == "local":
        model_dir = settings.get("tensorfold_model_dir") or ""
        what = _host_path_problem(model_dir) if model_dir else None
        if not model_dir:
            bad("tensorfold_model_dir", "is empty while tensorfold_model_source is local",
                "Set it to the checkpoint folder to serve, or use tensorfold_model_source: download.")
        elif what:
            bad("tensorfold_model_dir", what,
                "Give the checkpoint folder's absolute path on the host, such as /data/glm53-checkpoint.")
        if plain_bool(settings.get("tensorfold_ablit")):
            bad("tensorfold_ablit", "is true while tensorfold_model_source is local",
                "Ablit weights are downloaded; to serve a local Ablit checkpoint set "
                "tensorfold_ablit: false and point tensorfold_model_dir at it.")
    # No token is required here: Ablit weights verified in place serve without one (the recipe's
    # way); weights_fetch asks for it only when gated files must still be downloaded (E_HF_TOKEN).

    if has("tensorfold_gpus"):
        gpus = settings["tensorfold_gpus"]
        if isinstance(gpus, str):
            # The roles read a string character by character ("0,1" is '0', ',', '1').
            bad("tensorfold_gpus", "is the text %r, not a list" % (gpus,),
                "Give a list: in YAML [0, 1]; on the command line -e '{\"tensorfold_gpus\": [0, 1]}'.")
        else:
            ints = [plain_int(g) for g in (gpus if isinstance(gpus, (list, tuple)) else [])]
            ints = [g for g in ints if g is not None and g >= 0]
            if not isinstance(gpus, (list, tuple)) or len(gpus) != 2 or len(ints) != 2:
                bad("tensorfold_gpus", "is %r; the recipe runs two ranks, one per GPU" % (gpus,),
                    "List exactly two GPU indices in rank order, such as [0, 1] or [1, 0].")
            elif ints[0] == ints[1]:
                bad("tensorfold_gpus", "names GPU %s twice" % ints[0], "List two different GPU indices.")

    # The roles pass these on as written (only lower-cased): "auto " reaches the engine as is.
    for name, ok, todo in (
            ("tensorfold_parallel", lambda v: v == "auto" or 1 <= v <= MAX_PARALLEL,
             "Use a number of streams from 1 to %d, or auto." % MAX_PARALLEL),
            ("tensorfold_context", lambda v: v == "auto" or MIN_CONTEXT <= v <= MAX_CONTEXT,
             "Use a window from %d to %d tokens, or auto (the largest that fits)." % (MIN_CONTEXT, MAX_CONTEXT)),
            ("weights_fetch_peer_fanout", lambda v: v == "auto" or v >= 0,
             "Use auto, 0 (every peer copies from the seed at once) or the number of peers one host serves at once, such as 1.")):
        if has(name):
            raw = settings[name]
            parsed = parse_parallel(raw)
            if isinstance(raw, str) and raw != raw.strip():
                bad(name, "is %r, with spaces around it" % (raw,), todo + " Write it with no spaces.")
            elif parsed is None or not ok(parsed):
                bad(name, "is %r" % (raw,), todo)

    if has("tensorfold_memory_reserve_gib"):
        reserve = plain_number(settings["tensorfold_memory_reserve_gib"])
        if reserve is None or not 0 <= reserve < 96:
            bad("tensorfold_memory_reserve_gib", "is %r" % (settings["tensorfold_memory_reserve_gib"],),
                "Use GiB per GPU from 0 to below the card's memory, written as a plain number such as 4 or 3.5 "
                "(the engine gets the text); the recipe's default is 4 (3.5 fits four streams on pages).")

    for name, low, high, todo in (
            ("tensorfold_max_tokens", 1, None, "Use a positive number of tokens."),
            ("tensorfold_wait_timeout", 30, None,
             "Use at least 30 seconds; the first start hashes every shard and needs far more (2400 by default)."),
            ("tensorfold_max_gpu_used_mib", 0, None, "Use a number of MiB, 0 or more (4096 by default)."),
            ("tensorfold_min_gpu_free_mib", 0, None, "Use a number of MiB, 0 or more (88000 by default)."),
            ("tensorfold_max_fail_percentage", 0, 100, "Use a percentage from 0 to 100."),
            ("tensorfold_restart_max_fail_percentage", 0, 100, "Use a percentage from 0 to 100.")):
        if has(name):
            value = plain_int(settings[name])
            if value is None or value < low or (high is not None and value > high):
                bad(name, "is %r" % (settings[name],), todo + (" Write it with digits only." if value is None else ""))

    problems += _port_problems(settings, host, groups, defaults or {})

    for name in ("tensorfold_serial", "tensorfold_restart_serial"):
        if has(name) and not serial_ok(settings[name]):
            bad(name, "is %r, which Ansible's serial cannot take as a batch size" % (settings[name],),
                "Use a number of hosts of 1 or more, a percentage from 1% to 100% such as \"25%\", or a list of "
                "those such as [1, \"25%\"].")

    if has("tensorfold_host"):
        host_value = settings["tensorfold_host"]
        if not _is_ip(host_value):
            hint = " (an IPv6 address goes without brackets)" if isinstance(host_value, str) and host_value.startswith("[") else ""
            bad("tensorfold_host", "is %r, not an IP address%s" % (host_value, hint),
                "Use the address the API binds to: 0.0.0.0 (every IPv4 interface), :: (every interface), "
                "127.0.0.1, ::1 or one of the host's addresses.")

    if has("tensorfold_served_name"):
        served = settings["tensorfold_served_name"]
        if not isinstance(served, str) or not served.strip() or served != served.strip() or re.search(r"[\x00-\x1f\x7f]", served):
            bad("tensorfold_served_name", "is %r" % (served,),
                "Give the model id clients ask for, such as GLM-5.3-Flash: not empty, no spaces around it, no line breaks.")

    if has("tensorfold_data_dir"):
        what = _host_path_problem(settings["tensorfold_data_dir"])
        if what:
            bad("tensorfold_data_dir", what, "Give an absolute folder on the host, such as /srv/glm53.")

    if has("tensorfold_container_name") and not _CONTAINER_NAME.fullmatch(str(settings["tensorfold_container_name"] or "")):
        bad("tensorfold_container_name", "is %r, not a valid container name" % (settings["tensorfold_container_name"],),
            "Use letters, digits, '_', '.' and '-'.")

    for name, with_tag in (("tensorfold_image_name", False), ("tensorfold_image_registry", False),
                           ("tensorfold_image_builder_image", True), ("tensorfold_image_runtime_image", True)):
        value = settings.get(name)
        if not has(name) or (name == "tensorfold_image_registry" and value == ""):
            continue
        what = image_name_problem(value, with_tag)
        if what:
            example = ("nvidia/cuda:13.0.1-runtime-ubuntu24.04" if with_tag else
                       "glm53/tensorfold-native or registry.example:5000/glm53/tensorfold-native")
            bad(name, "is %r, which %s" % (value, what),
                "Use a Docker reference such as %s." % example)

    if has("tensorfold_engine_names") and isinstance(settings["tensorfold_engine_names"], dict):
        for what in engine_names_problems(settings["tensorfold_engine_names"]):
            bad("tensorfold_engine_names", what,
                "Give each knob a flag (--name) or an environment variable name of its own, not one the "
                "collection already passes to the ranks, and each name once.")

    if isinstance(settings.get("rank_container_ulimits"), (list, tuple)):
        for what in [ulimit_problem(entry) for entry in settings["rank_container_ulimits"]]:
            if what:
                bad("rank_container_ulimits", "holds %s" % what,
                    "List docker ulimits as NAME:SOFT:HARD, such as memlock:-1:-1 or stack:67108864:67108864 "
                    "(NAME one of %s)." % ", ".join(DOCKER_ULIMITS))
                break
    policy = settings.get("rank_container_restart_policy")
    if has("rank_container_restart_policy") and not (isinstance(policy, str) and _RESTART_POLICY.fullmatch(policy)):
        bad("rank_container_restart_policy", "is %r, not a restart policy docker takes" % (policy,),
            "Use no, always, unless-stopped, on-failure or on-failure:N (N retries, such as on-failure:3).")

    # The toolkit's pins, checked here rather than in its batched play: earlier batches would have
    # installed packages before a later batch read a bad value.
    version = settings.get("nvidia_toolkit_version")
    if has("nvidia_toolkit_version") and not (isinstance(version, str) and _TOOLKIT_VERSION.fullmatch(version)):
        bad("nvidia_toolkit_version", "is %r, not VERSION-RELEASE as NVIDIA publishes it" % (version,),
            "Give the version of the four packages as NVIDIA's repository lists it, such as 1.18.2-1.")
    keyring = settings.get("nvidia_toolkit_apt_keyring")
    if has("nvidia_toolkit_apt_keyring") and not (isinstance(keyring, str) and keyring.endswith(".asc")):
        # The role writes the key as ASCII armour, which apt 2.x reads only from a file named .asc.
        bad("nvidia_toolkit_apt_keyring", "is %r, which does not end in .asc: the role writes the key as ASCII armour, "
            "which apt reads only from a .asc file (it skips another name as an unsupported filetype, then refuses "
            "the repository with NO_PUBKEY)" % (keyring,),
            "End the path in .asc, such as /etc/apt/keyrings/nvidia-container-toolkit.asc (the default).")

    if groups is not None:
        problems += _inventory_problems(settings, host, groups, defaults or {})

    # Secrets: the values themselves are never echoed.
    key = settings.get("tensorfold_api_key")
    if has("tensorfold_api_key") and key is None:
        # The roles read an unset key as "" (| length); null fails them after host steps ran.
        bad("tensorfold_api_key", "is null (a `tensorfold_api_key:` line with no value)",
            "For no key, remove the line or write tensorfold_api_key: \"\"; for a key, give it as a quoted string, "
            "kept in a vault.")
    elif key is not None and not isinstance(key, str):
        bad("tensorfold_api_key", "is not text (a list, a mapping or a number; the value is not shown)",
            "Give one key as a quoted string, kept in a vault.")
    elif key and (re.search(r"[\s,]", key) or len(key) < 8):
        bad("tensorfold_api_key", "has white space or a comma, or is shorter than 8 characters",
            "Use one key of at least 8 characters without spaces or commas (the engine splits keys on commas).")
    token = settings.get("tensorfold_hf_token")
    if token is not None and not isinstance(token, str):
        bad("tensorfold_hf_token", "is not text (a list, a mapping or a number; the value is not shown)",
            "Give the Hugging Face read token as a quoted string, kept in a vault.")
    elif token and re.search(r"\s", token):
        # weights_fetch writes it to the host and sends it as an HTTP header: a line break breaks both.
        bad("tensorfold_hf_token", "has white space or a line break in it (the value is not shown)",
            "Give the token alone, without spaces or a trailing newline (a vault file's value often ends with one).")

    return problems
