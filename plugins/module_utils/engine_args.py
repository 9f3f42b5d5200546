# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""How each of the recipe's settings reaches ``tensorfold-native``: one table, one argv builder.

The runner script the container runs (:func:`runner_script`), the engine's argument check (the
same script with ``--argument-check``) and the ``--check`` plan (``plan.py``) all build the
ranks' command lines here, so what the plan prints is what the engine receives.

Each knob is a flag or an environment variable. The engine contract names the flags and the
environment variables marked ``confirmed``. DENSE, HEAD, KV_PAGES, ABSORB_MMA and W8A8 have no
flag or variable in the contract. For DENSE, the public sibling recipes built on this engine export
``TF_GLM_DENSE`` (with other engine versions); for the other four no public source gives a name, so
theirs are this collection's guess. All five stay marked unconfirmed in the docs and in the plan,
and the operator can override each with ``tensorfold_engine_names`` (a name starting with ``--``
is a flag taking the value, anything else an environment variable).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

ENGINE = "/opt/tensorfold/native/bin/tensorfold-native"
MODEL_MOUNT = "/model"
DRAFTER_MOUNT = "/drafter"
LOG_MOUNT = "/logs"
API_KEY_MOUNT = "/run/tensorfold/api-key"
# Where the engine keeps each rank's checkpoint hashes (our reading; docs/rank_container.md).
CACHE_MOUNT = "/root/.cache/tensorfold"
ARGUMENT_CHECK_MODEL = "/nonexistent/argument-check"


# The key file rank 0 reads (--api-key-file). The contract asks for mode 600 and says nothing of how
# the text is read: the key alone, no newline, is the same key to an engine that trims and to one
# that takes the text as it is.
def api_key_file_text(key):
    return key


def api_key_file_holds(text, key):
    """Whether a key file's text is ``key``; also as releases before 2026-12-02 wrote it (with a
    newline), so the upgrade itself restarts no engine."""
    return text in (key, key + "\n")


# The knobs without a name in the engine contract: setting -> (default name, how the value is
# written). Overridable with tensorfold_engine_names. DENSE's is the sibling recipes' name; the
# others have no public source.
UNCONFIRMED = {
    "kv_pages": ("TENSORFOLD_KV_PAGES", "bool"),
    "dense": ("TF_GLM_DENSE", "str"),
    "head": ("TENSORFOLD_HEAD", "str"),
    "absorb_mma": ("TENSORFOLD_ABSORB_MMA", "bool"),
    "w8a8": ("TENSORFOLD_W8A8", "bool"),
}

# Every setting's way into the engine, for the docs and the plan: (setting, way, name, confirmed).
# The unconfirmed rows are filled in by knob_table() with the names in force.
CONFIRMED = (
    ("tensorfold_served_name", "flag", "--name (rank 0)"),
    ("tensorfold_host", "flag", "--host (rank 0)"),
    ("tensorfold_port", "flag", "--port (rank 0)"),
    ("tensorfold_context", "flag", "--context"),
    ("tensorfold_parallel", "flag", "--parallel"),
    ("tensorfold_kv", "flag", "--kv-dtype"),
    ("tensorfold_max_tokens", "flag", "--max-tokens"),
    ("tensorfold_thinking", "flag", "--thinking / --no-thinking"),
    ("tensorfold_reasoning_effort", "flag", "--reasoning-effort"),
    ("tensorfold_vision", "flag", "--vision"),
    ("tensorfold_drafter", "flag", "--drafter DIR / --no-drafts"),
    ("tensorfold_nccl_port", "flag", "--master 127.0.0.1 --master-port"),
    ("tensorfold_gpus", "flag", "--device (and CUDA_VISIBLE_DEVICES)"),
    ("tensorfold_api_key", "flag", "--api-key-file (rank 0, a 0600 file)"),
    ("tensorfold_memory_reserve_gib", "env", "TENSORFOLD_MEMORY_RESERVE_GIB"),
)

_FLAG_NAME = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _flag(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def engine_names(overrides=None):
    """The names in force for the unconfirmed knobs: the table merged with the operator's
    ``tensorfold_engine_names``. Raises ValueError naming a bad key or name."""
    names = dict((knob, spec[0]) for knob, spec in UNCONFIRMED.items())
    for knob, name in (overrides or {}).items():
        if knob not in UNCONFIRMED:
            raise ValueError("tensorfold_engine_names has no knob %r (known: %s)" % (knob, ", ".join(sorted(UNCONFIRMED))))
        name = str(name)
        if not (_FLAG_NAME.match(name) or _ENV_NAME.match(name)):
            raise ValueError("tensorfold_engine_names.%s must be a flag (--name) or an environment "
                             "variable name, not %r" % (knob, name))
        names[knob] = name
    return names


def _knob_values(settings):
    s = settings
    return {
        "kv_pages": "1" if _flag(s.get("tensorfold_kv_pages", True)) else "0",
        "dense": str(s.get("tensorfold_dense", "q8")),
        "head": str(s.get("tensorfold_head", "bf16")),
        "absorb_mma": "1" if _flag(s.get("tensorfold_absorb_mma", False)) else "0",
        "w8a8": "1" if _flag(s.get("tensorfold_w8a8", False)) else "0",
    }


def _unconfirmed_split(settings):
    """(flags, env) for the unconfirmed knobs under the names in force."""
    names = engine_names(settings.get("tensorfold_engine_names"))
    flags, env = [], {}
    for knob, value in sorted(_knob_values(settings).items()):
        name = names[knob]
        if name.startswith("--"):
            flags += [name, value]
        else:
            env[name] = value
    return flags, env


def engine_env(settings):
    """The environment variables the engine reads for these settings (both ranks)."""
    env = {"TENSORFOLD_MEMORY_RESERVE_GIB": str(settings.get("tensorfold_memory_reserve_gib", 4))}
    env.update(_unconfirmed_split(settings)[1])
    return env


def pin_cards(indices, gpus=None):
    """The two ranks' cards: ``{"device_ids", "cuda_devices", "first"}``.

    ``indices`` are the settings' nvidia-smi indices in rank order; ``gpus`` the cards as gpu_info
    reads them (the host checks' list in rank order, or every card of the host: those of
    ``indices`` are taken). With a UUID for every card the container asks for the cards by UUID,
    so a renumbering between boots cannot swap them; otherwise by index. Inside the container CUDA
    numbers only the requested cards, in PCI bus order (nvidia-smi's): a card's number there is its
    position among the requested indices. ``first`` is rank 0's card (the fit key's GPU), {} unknown."""
    indices = [int(i) for i in indices]
    listed = [g for g in (gpus or []) if isinstance(g, dict)]
    if len(listed) == len(indices) and [g.get("index", i) for g, i in zip(listed, indices)] == indices:
        cards = listed  # the ranks' cards already, in rank order
    else:
        by_index = dict((g.get("index"), g) for g in listed)
        cards = [by_index[i] for i in indices if i in by_index]
    uuids = [g.get("uuid") for g in cards if g.get("uuid")]
    if len(uuids) == len(indices):
        return {"device_ids": uuids, "cuda_devices": ",".join(uuids), "first": cards[0]}
    ordered = sorted(indices)
    return {"device_ids": [str(i) for i in indices], "cuda_devices": ",".join(str(ordered.index(i)) for i in indices),
            "first": cards[0] if cards else {}}


def runner_env(settings, cuda_devices):
    """Everything the runner exports for both ranks: NCCL over loopback, offline Hub, the cards
    pinned in PCI order, and the engine's own variables."""
    env = {"NCCL_SOCKET_IFNAME": "lo", "NCCL_IB_DISABLE": "1", "HF_HUB_OFFLINE": "1",
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(cuda_devices)}
    env.update(engine_env(settings))
    return env


def shared_flags(settings, context, drafter_path=DRAFTER_MOUNT, extra_args=()):
    """The flags both ranks load with (the ranks compare a fingerprint of these)."""
    s = settings
    flags = ["--tp", "2", "--master", "127.0.0.1", "--master-port", str(int(s.get("tensorfold_nccl_port", 29583))),
             "--context", str(int(context)),
             "--parallel", str(s.get("tensorfold_parallel", 4)).lower(),
             "--kv-dtype", str(s.get("tensorfold_kv", "fp8")),
             "--max-tokens", str(int(s.get("tensorfold_max_tokens", 32768))),
             "--thinking" if _flag(s.get("tensorfold_thinking", False)) else "--no-thinking",
             "--reasoning-effort", str(s.get("tensorfold_reasoning_effort", "high"))]
    drafter = s.get("tensorfold_drafter", "dflash2")
    if drafter == "dflash2":
        flags += ["--drafter", drafter_path]
    elif drafter == "none":
        flags.append("--no-drafts")
    if _flag(s.get("tensorfold_vision", True)):
        flags.append("--vision")
    flags += _unconfirmed_split(s)[0]
    flags += [str(a) for a in extra_args or ()]
    return flags


def rank_flags(settings, rank, api_key_file=None):
    """The flags of one rank: rank 0 alone serves the API (and reads the key file)."""
    s = settings
    if rank != 0:
        return ["--rank", "1", "--device", "1"]
    flags = ["--rank", "0", "--device", "0", "--name", str(s.get("tensorfold_served_name", "GLM-5.3-Flash")),
             "--host", str(s.get("tensorfold_host", "0.0.0.0")), "--port", str(int(s.get("tensorfold_port", 8020)))]
    if api_key_file:
        flags += ["--api-key-file", api_key_file]
    return flags


def rank_argv(settings, rank, context, model_path=MODEL_MOUNT, drafter_path=DRAFTER_MOUNT, api_key_file=None,
              extra_args=()):
    """The whole command line of one rank, as the runner script execs it."""
    return ([ENGINE, "serve", model_path] + shared_flags(settings, context, drafter_path, extra_args)
            + rank_flags(settings, rank, api_key_file))


def knob_table(settings=None):
    """Every setting's way into the engine: dicts (setting, way, name, confirmed)."""
    names = engine_names((settings or {}).get("tensorfold_engine_names"))
    rows = [{"setting": setting, "way": way, "name": name, "confirmed": True} for setting, way, name in CONFIRMED]
    for knob in sorted(UNCONFIRMED):
        name = names[knob]
        rows.append({"setting": "tensorfold_" + knob, "way": "flag" if name.startswith("--") else "env",
                     "name": name, "confirmed": False})
    return rows


def unconfirmed_note(settings=None):
    """One line for the plan: the names the engine contract does not confirm."""
    rows = [r for r in knob_table(settings) if not r["confirmed"]]
    return ("engine names not confirmed by the engine's documentation (override with tensorfold_engine_names): "
            + ", ".join("%s %s" % (r["setting"], r["name"]) for r in rows))


def _bash_array(name, items):
    lines = ["%s=(" % name]
    lines += ["  %s" % shlex.quote(item) for item in items]
    lines.append(")")
    return "\n".join(lines)


RUNNER = """#!/bin/bash
# Runs both tensor-parallel ranks of tensorfold-native in the container %(container)s.
# Written by glm53.tensorfold's engine_container module and kept as logs/current/runner.sh.
# Rank 1 runs on the second card of tensorfold_gpus, rank 0 on the first (rank 0 serves the API
# and holds the vision tower). When either rank exits the other is stopped, so the container ends
# (the engine has no reconnect), with a non-zero status when a rank failed.
#   runner.sh                   start both ranks
#   runner.sh --argument-check  let the engine check these flags without a GPU or a model
#                               (exit 2: a flag is wrong; exit 1 "neither a directory nor a
#                               Hugging Face repo id": the flags are accepted)
set -uo pipefail

LOG_DIR=%(log_dir)s
ENGINE=%(engine)s

# NCCL over loopback, the Hub offline, the two cards pinned in PCI order and listed in rank order
# (--device 0 is tensorfold_gpus[0]), and the settings the engine reads from its environment.
%(exports)s
# The API key never travels in the environment of either rank.
unset TENSORFOLD_API_KEY

# Flags both ranks load with: the ranks compare a fingerprint of these before loading.
%(both)s
# Rank 0 alone serves the API.
%(rank0)s
%(rank1)s

if [ "${1:-}" = "--argument-check" ]; then
  exec "$ENGINE" serve %(check_model)s "${BOTH[@]}" "${RANK0[@]}"
fi

# Both logs get the line: each is appended to across runs, and a reader takes the last run from it.
# It goes on a line of its own: a rank killed mid-line (or a progress line ended by a carriage
# return) leaves its log without a final line break.
started="runner: $(date -u +%%FT%%TZ) starting rank 1 and rank 0 (window %(context)s)"
for log in "$LOG_DIR/rank1.log" "$LOG_DIR/rank0.log"; do
  if [ -s "$log" ] && [ -n "$(tail -c 1 "$log")" ]; then echo >>"$log"; fi
  echo "$started" >>"$log"
done

"$ENGINE" serve %(model)s "${BOTH[@]}" "${RANK1[@]}" >>"$LOG_DIR/rank1.log" 2>&1 &
RANK1_PID=$!
"$ENGINE" serve %(model)s "${BOTH[@]}" "${RANK0[@]}" >>"$LOG_DIR/rank0.log" 2>&1 &
RANK0_PID=$!
# A stop signal (docker's init passes on `docker stop` and a Docker engine shutdown) stops both
# ranks, and the container ends with status 143: not a success, so an on-failure restart policy
# brings the engine back after a Docker or host restart. The role's own stop turns the policy off
# first.
stopping=0
trap 'stopping=1; kill -TERM "$RANK0_PID" "$RANK1_PID" 2>/dev/null' TERM INT
# `docker logs` follows rank 0's log; the file itself is written by rank 0 directly, so its last
# lines (a refusal, a reason for exiting) are on disk even when the container ends at once.
tail -n +1 -F "$LOG_DIR/rank0.log" 2>/dev/null &
TAIL_PID=$!
trap 'kill "$TAIL_PID" 2>/dev/null' EXIT

# Which rank ended. `wait -n -p` (bash 5.1 and later) names the rank it reports, but bash may
# already have filed away a rank that ended before or during the wait: `wait -n` then skips it
# ("no such job") and reports the other rank when it follows. So a rank already gone is taken
# first, and when both have ended by the time the wait returns, their statuses decide: a rank
# whose control link closed exits 0 or 3, so the rank with any other status ended first.
# `wait PID` gives a finished rank's status however long ago it ended.
ended_pid=
kill -0 "$RANK1_PID" 2>/dev/null || ended_pid=$RANK1_PID
kill -0 "$RANK0_PID" 2>/dev/null || ended_pid=${ended_pid:-$RANK0_PID}
if [ -n "$ended_pid" ]; then
  wait "$ended_pid"
elif (( BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] >= 501 )); then
  wait -n -p ended_pid "$RANK0_PID" "$RANK1_PID"
else
  wait -n "$RANK0_PID" "$RANK1_PID"
fi
first=$?
if [ "$stopping" = 1 ]; then
  wait "$RANK0_PID" "$RANK1_PID"
  exit 143
fi
if [ -z "$ended_pid" ]; then
  if kill -0 "$RANK0_PID" 2>/dev/null; then ended_pid=$RANK1_PID; else ended_pid=$RANK0_PID; fi
fi
if [ "$ended_pid" = "$RANK1_PID" ]; then ended=1; other=$RANK0_PID; else ended=0; other=$RANK1_PID; fi
link_closed() { [ "$1" = 0 ] || [ "$1" = 3 ]; }
# A rank exits 0 or 3 when the other's control link closes. The other rank's own end can reach
# this script a moment after that exit (its socket closes before the kernel reports its end), so
# it gets 5 s to end before the first status is taken as the first rank's.
waited=0
if link_closed "$first"; then
  while [ "$waited" -lt 50 ] && kill -0 "$other" 2>/dev/null; do sleep 0.1; waited=$((waited + 1)); done
fi
if ! kill -0 "$other" 2>/dev/null; then
  wait "$other"
  then=$?
  if link_closed "$first" && ! link_closed "$then"; then
    ended=$((1 - ended)); swap=$first; first=$then; then=$swap
  fi
  echo "runner: rank $ended exited with status $first; rank $((1 - ended)) has ended too (status $then)" >>"$LOG_DIR/rank$ended.log"
  if [ "$first" -ne 0 ]; then exit "$first"; fi
  exit "$then"
fi
# One rank ended: the engine has no reconnect, so the other goes too. It normally notices the
# closed control link and exits by itself; a stop signal after 5 s (counting the wait above)
# covers a hung rank.
echo "runner: rank $ended exited with status $first; stopping the other rank" >>"$LOG_DIR/rank$ended.log"
term_at=$(( waited >= 50 ? 1 : 5 ))
for second in $(seq 1 25); do
  kill -0 "$other" 2>/dev/null || break
  [ "$second" = "$term_at" ] && kill -TERM "$other" 2>/dev/null
  sleep 1
done
kill -KILL "$other" 2>/dev/null
wait "$other"
then=$?
# The container's exit status says whether a rank failed (docker's restart policy reads it): the
# first rank's status when it failed, else the other's.
if [ "$first" -ne 0 ]; then exit "$first"; fi
exit "$then"
"""


def container_mounts(model_dir, cache_dir, log_dir, drafter_dir=None, key_file=None, argument_check=False):
    """The container's ``--mount`` arguments. The argument check mounts no checkpoint or cache and
    its log folder read-only."""
    out = []
    if not argument_check:
        out += ["--mount", "type=bind,source=%s,target=%s,readonly" % (model_dir, MODEL_MOUNT),
                "--mount", "type=bind,source=%s,target=%s" % (cache_dir, CACHE_MOUNT)]
    out += ["--mount", "type=bind,source=%s,target=%s%s" % (log_dir, LOG_MOUNT, ",readonly" if argument_check else "")]
    if drafter_dir:
        out += ["--mount", "type=bind,source=%s,target=%s,readonly" % (drafter_dir, DRAFTER_MOUNT)]
    if key_file:
        out += ["--mount", "type=bind,source=%s,target=%s,readonly" % (key_file, API_KEY_MOUNT)]
    return out


def container_run_argv(name, image, env, ulimits, labels, device_ids, mounts):
    """``docker run``'s arguments (after ``docker``) for the recipe's container: what the
    engine_container module runs and the plan prints. ``labels``: (name, value) pairs;
    ``device_ids``: the cards in rank order, None to request none (test hosts)."""
    argv = ["run", "-d", "--name", name, "--init", "--ipc", "host", "--network", "host",
            "--shm-size", "16g", "--restart", "no", "-e", "HF_HUB_OFFLINE=1"]
    for key in sorted(env or {}):
        argv += ["-e", "%s=%s" % (key, env[key])]
    for limit in ulimits:
        limit_name, soft, hard = str(limit).split(":")
        argv += ["--ulimit", "%s=%s:%s" % (limit_name, soft, hard)]
    for key, value in labels:
        argv += ["--label", "%s=%s" % (key, value)]
    if device_ids is not None:
        argv += ["--gpus", '"device=%s"' % ",".join(device_ids)]
    return argv + list(mounts) + [image, "/bin/bash", LOG_MOUNT + "/runner.sh"]


def runner_script(settings, context, cuda_devices, api_key_file=None, extra_args=(), container="glm53-zig",
                  drafter_path=DRAFTER_MOUNT):
    """The runner script's text for one window. Its arrays are exactly :func:`rank_argv`'s."""
    env = runner_env(settings, cuda_devices)
    exports = "\n".join("export %s=%s" % (name, shlex.quote(env[name])) for name in sorted(env))
    return RUNNER % {
        "container": container, "log_dir": LOG_MOUNT, "engine": shlex.quote(ENGINE),
        "exports": exports, "context": int(context),
        "both": _bash_array("BOTH", shared_flags(settings, context, drafter_path, extra_args)),
        "rank0": _bash_array("RANK0", rank_flags(settings, 0, api_key_file)),
        "rank1": _bash_array("RANK1", rank_flags(settings, 1)),
        "model": shlex.quote(MODEL_MOUNT), "check_model": shlex.quote(ARGUMENT_CHECK_MODEL),
    }
