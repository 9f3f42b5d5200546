# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The engine container's start, restart and stop, as one flow (the engine_container module).

A start: take the host's start lock (an flock held by this process, so the kernel releases it
when the process ends, however it ends), have the engine check its flags in a throw-away
container, stop the old container, start the new one, wait for the API while watching the
container, start once more at the window the engine's own figures allow (CONTEXT=auto), record
the window and what was started, and give the container its restart policy once it serves.

Docker is driven through its CLI with argv lists (``Docker.run`` below); nothing here builds a
shell string. The API key only ever goes into a 0600 file mounted read-only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import hashlib
import json
import os
import tarfile
import tempfile
import time

import http.client as http_client

from ansible_collections.glm53.tensorfold.plugins.module_utils import box_module, context_fit, engine_args, engine_log
from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi_command import read_cards
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem, record
from ansible_collections.glm53.tensorfold.plugins.module_utils.health import (
    health_ok, health_ready, readiness_request, says_warming)
from ansible_collections.glm53.tensorfold.plugins.module_utils.net import http_get, http_request, url_host

# Every module_utils file the flow imports, itself first: what the box reader sends to the host.
READER_MODULES = ("engine_container", "box_module", "codes", "context_fit", "engine_args", "engine_log", "health", "net",
                  "nvidia_smi_command", "nvidia_smi")

ACCEPTED = "neither a directory nor a Hugging Face repo id"
# The engine's own warning at a start that listens beyond loopback with no API key.
OPEN_API = "non-loopback server has no API key"
STATE_RECORD = "engine.json"
# The label (after rank_container_label) of the throw-away container of the engine's argument check.
ARGUMENT_CHECK_LABEL = ".argument-check"
# In the state folder while the engine is stopped on purpose (state=stopped): heal.yml reads it and
# leaves the box alone; the next start that serves removes it.
STOPPED_MARK = "stopped"
# How often a start asks /health while it waits for the API.
WAIT_POLL_S = 0.25
# The most starts that try the GPUs' memory in one start (start_locked): the first, one at the
# window its figures allow, and one more at the window the other rank's figures allow.
MEMORY_STARTS = 3
# The most containers one start runs: those, and one refused by the model's own window, which
# names no memory figures and so does not count as one of them.
MAX_STARTS = MEMORY_STARTS + 1
# What a start holding the lock spends besides its waits: the argument check and docker's own steps.
START_STEPS_S = 120


def longest_start_s(wait_timeout, stop_grace):
    """The longest a start may hold the host's start lock: the stop (open requests get the grace,
    then docker stop the grace again), every start it may make each waiting up to ``wait_timeout``,
    and START_STEPS_S for the rest. A start waiting this long for the lock outlasts one in progress."""
    return MAX_STARTS * int(wait_timeout) + 2 * int(stop_grace) + START_STEPS_S


def fit_advice(kind, fits, window, auto, page_rows):
    """What an E_FIT names beyond the refusal, and what to do: (what fits, todo). ``fits`` is
    context_fit.what_fits's answer for the refused ``window``. A todo of None is E_FIT's own."""
    context, parallel, single = fits["context"], fits["parallel"], fits["one_stream"]
    if kind == "window" and context is not None:
        return ("this model takes at most %d tokens" % context,
                "Set tensorfold_context to %d or less, or to auto." % context)
    if context is not None and context < window:
        said = "by the engine's figures %d tokens would fit at --parallel %s" % (context, parallel)
        if auto:
            return said, "Set tensorfold_context to %d, lower tensorfold_parallel, or free GPU memory." % context
        return said, "Set tensorfold_context to %d (or auto), lower tensorfold_parallel, or free GPU memory." % context
    if context is None and kind in ("no_stream", "parallel"):
        # No window fits: a lower context alone cannot help.
        if single is not None and parallel not in ("1", "auto"):
            return ("by the engine's figures no window fits --parallel %s; one stream would fit %d tokens"
                    % (parallel, single),
                    "Lower tensorfold_parallel (or the --parallel of rank_container_engine_args), or free GPU "
                    "memory; a lower tensorfold_context alone does not help.")
        return ("by the engine's figures not one stream fits, even at a %d-token window" % page_rows,
                "Free GPU memory: stop what holds it, lower tensorfold_memory_reserve_gib, or set tensorfold_vision: "
                "false or tensorfold_drafter: mtp; a lower tensorfold_context or tensorfold_parallel does not help.")
    return "", None


def argument_check_verdict(rc, output):
    """What the engine's answer to the argument check means: None when it accepted the flags
    (exit 1 naming the missing model as not a directory nor a repo id), else (kind, what to quote).
    ``flags``: exit 2, a flag is wrong (the usage and the error, on one line); ``docker``: docker's
    own 125 (the daemon failed), 126 and 127 (the command could not be run or found), with what
    docker or the shell said; ``load``: any other status, the engine's own (the check runs in the
    foreground): exit 1 with another problem, its ``tensorfold:`` lines, or a death by a signal
    (132 an image built for another CPU, 139), its last lines."""
    if rc == 1 and ACCEPTED in output:
        return None
    lines = [line.strip() for line in engine_log.clean(output).split("\n") if line.strip()]
    if rc == 2:
        return "flags", " | ".join(lines) or "(no output)"
    if rc in (125, 126, 127):
        return "docker", " | ".join(lines[-3:]) or "(no output)"
    said = [line for line in lines if line.startswith("tensorfold:")] or lines[-3:]
    return "load", " | ".join(said) or "(no output)"


class StartFailed(Exception):
    """A start that failed with a code; ``message`` is the formatted problem."""

    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code
        self.message = message


class Docker(object):
    """The docker CLI through a ``run(argv) -> (rc, out, err)`` function (the module's)."""

    def __init__(self, run):
        self._run = run

    def __call__(self, *args):
        return self._run(["docker"] + [str(a) for a in args])

    def inspect(self, name):
        rc, out, _err = self("container", "inspect", name)
        if rc != 0:
            return None
        found = json.loads(out or "[]")
        return found[0] if found else None

    def image_exists(self, ref):
        return self("image", "inspect", "--format", "{{.Id}}", ref)[0] == 0

    def remove(self, name):
        self("rm", "-f", name)


def _now(fmt="%Y%m%dT%H%M%SZ"):
    return time.strftime(fmt, time.gmtime())


def _read(path, limit=None):
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return ""
    text = data.decode("utf-8", "replace")
    return text if limit is None else text


def _tail(text, lines):
    return "\n".join(text.splitlines()[-int(lines):])


def write_private(path, content):
    """Write ``content`` to a 0600 file atomically; True when it changed."""
    if _read(path) == content and (os.stat(path).st_mode & 0o777) == 0o600:
        return False
    folder = os.path.dirname(path)
    handle, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(handle, "w") as out:
        out.write(content)
    os.chmod(tmp, 0o600)
    os.rename(tmp, path)
    return True


# dockerd's refusal of `--gpus` when it registered no NVIDIA device driver (no hook on its PATH).
NO_GPU_DRIVER = "could not select device driver"


# The User-Agent of the one-token request a keyed start waits for (answers_a_request).
START_CHECK_AGENT = "glm53-start-check"


def open_connections(port, proc="/proc/net"):
    """Established TCP connections to local ``port`` (the API), read from the kernel's tables.

    The container shares the host's network, so its sockets are in these tables; this works
    whether or not API keys hide /health's live counts."""
    count = 0
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, name)) as handle:
                rows = handle.read().splitlines()[1:]
        except (IOError, OSError):
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4:
                continue
            local, state = fields[1], fields[3]
            if state == "01" and int(local.rsplit(":", 1)[1], 16) == int(port):
                count += 1
    return count


class Lock(object):
    """The host's start lock: an flock on a file, held by this process only. The kernel drops it
    when the process ends, so a killed start leaves no lock behind."""

    def __init__(self, path):
        self.path = path
        self.handle = None

    def acquire(self, wait_s, sleep=time.sleep, clock=time.time):
        handle = open(self.path, "a+")
        deadline = clock() + max(0, int(wait_s))
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (IOError, OSError) as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if clock() >= deadline:
                    handle.close()
                    return False
                sleep(1)
        self.handle = handle
        with open(self.path + ".owner", "w") as out:
            out.write("pid %d since %s\n" % (os.getpid(), _now("%Y-%m-%dT%H:%M:%SZ")))
        return True

    def owner(self):
        return _read(self.path + ".owner").strip() or "an unknown process"

    def release(self):
        if self.handle is not None:
            fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None


class EngineContainer(object):
    """One host's engine container. ``p`` holds the module's parameters."""

    def __init__(self, p, docker, check_mode=False, sleep=time.sleep, clock=time.time, http=None, read_gpus=None):
        self.p = p
        self.docker = docker
        self.read_gpus = read_gpus or (lambda: [])
        self._cards = None
        self.check_mode = check_mode
        self.sleep = sleep
        self.clock = clock
        self.http = http or self._http
        self.host = p["host"]
        self.state_dir = os.path.join(p["data_dir"], ".state")
        self.logs_dir = os.path.join(p["data_dir"], "logs")
        self.key_path = os.path.join(self.state_dir, "api-key")
        self.fit_file = os.path.join(self.state_dir, "context-fit.tsv")
        self.record_path = os.path.join(self.state_dir, STATE_RECORD)
        self.stopped_mark = os.path.join(self.state_dir, STOPPED_MARK)
        self.changed = False
        self.key = ""
        self.fingerprint_started = ""
        self.warnings = []
        self.messages = []

    # ------------------------------------------------------------------ helpers
    def fail(self, code, what, todo=None):
        raise StartFailed(code, problem(code, self.host, what, todo))

    def _http(self, path, timeout=5, key=None, body=None):
        """GET http://api/path, or POST ``body`` (a dict, as JSON) there; (status, body) or (None, reason)."""
        headers = {"Authorization": "Bearer " + key} if key else {}
        url = "http://%s:%s%s" % (url_host(self.p["api_host"]), self.p["port"], path)
        try:
            if body is None:
                status, body = http_get(url, timeout, headers=headers)
            else:
                # Named, as the smoke test's are, so an engine's logs tell the start's own request apart.
                headers.update({"Content-Type": "application/json", "User-Agent": START_CHECK_AGENT})
                status, unused, body = http_request("POST", url, timeout, body=json.dumps(body).encode(), headers=headers)
        except (IOError, OSError, http_client.HTTPException) as err:
            return None, str(err) or err.__class__.__name__
        # An error status carries no body the callers read (only /health's and /v1/models' 200s).
        return status, body.decode("utf-8", "replace") if 200 <= status < 300 else ""

    def ours(self, info):
        labels = (info or {}).get("Config", {}).get("Labels") or {}
        return labels.get(self.p["label"]) == "true"

    def settings(self):
        return self.p["settings"]

    def cards(self):
        """The ranks' cards (engine_args.pin_cards): from ``gpus`` when the host checks read them,
        else read here, once and only for a start (a stop needs none)."""
        if self._cards is None:
            gpus = self.p.get("gpus")
            self._cards = engine_args.pin_cards(self.p["gpu_indices"], gpus if gpus is not None else self.read_gpus())
        return self._cards

    def fit_key(self, image):
        """The context-fit cache key; the image tag defaults to the tag of the image that runs, the
        GPU's name and memory to rank 0's card."""
        fields = dict(self.p.get("fit_fields") or {})
        first = self.cards()["first"]
        fields.setdefault("gpu_name", first.get("name") or "")
        fields.setdefault("gpu_memory_mib", first.get("memory_total_mib", first.get("memory_total", "")))
        if not fields.get("image_tag"):
            fields["image_tag"] = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
        return context_fit.fit_key(fields)

    def window(self):
        """The window to start with: the setting, a cached fit, or the first window auto asks for."""
        context = str(self.p["context"]).strip().lower()
        if context != "auto":
            return int(context), False
        cached = context_fit.read_cache_file(self.fit_file)[0].get(self.key)
        return (int(cached), True) if cached else (int(self.p["auto_context"]), False)

    def runner(self, window):
        return engine_args.runner_script(
            self.settings(), window, self.cards()["cuda_devices"],
            engine_args.API_KEY_MOUNT if self.p["api_key"] else None,
            self.p["engine_args"], self.p["name"])

    def fingerprint(self, runner_text, image):
        keyed = bool(self.p["api_key"])
        data = {"runner": runner_text, "image": image, "model": self.p["model_dir"],
                "drafter": self.p["drafter_dir"] or "", "cache": self.p["cache_dir"], "env": self.p["env"] or {},
                "devices": self.cards()["device_ids"], "gpu_requests": self.p["gpu_requests"],
                "ulimits": self.p["ulimits"], "keyed": keyed}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()

    def mounts(self, run_dir, argument_check=False):
        key_file = None
        if self.p["api_key"]:
            # The check reads its own copy (the running container's file is not touched before the replace).
            key_file = os.path.join(run_dir, "api-key") if argument_check else self.key_path
        return engine_args.container_mounts(self.p["model_dir"], self.p["cache_dir"], run_dir, self.p["drafter_dir"],
                                            key_file, argument_check)

    def read_record(self):
        try:
            return json.loads(_read(self.record_path) or "{}")
        except ValueError:
            return {}

    def write_record(self, image, window):
        cards = self.cards()
        data = {"image": image, "device_ids": cards["device_ids"], "cuda_devices": cards["cuda_devices"],
                "context": window, "started": _now("%Y-%m-%dT%H:%M:%SZ")}
        with open(self.record_path + ".tmp", "w") as out:
            json.dump(data, out, indent=1, sort_keys=True)
        os.rename(self.record_path + ".tmp", self.record_path)

    def result(self, status, context=None, streams=None, starts=0, log_dir=None):
        return {"status": status,
                "endpoint": ("http://%s:%s/v1" % (url_host(self.p["api_host"]), self.p["port"])
                             if status not in ("stopped", "not_deployed") else ""),
                "context": context, "streams": streams, "starts": starts,
                "log_dir": log_dir if log_dir is not None else os.path.join(self.logs_dir, "current"),
                "warnings": self.warnings}

    # ------------------------------------------------------------------ stop
    def stop(self, info):
        """Stop our container: wait for open requests (up to the grace), archive, remove."""
        if info is None:
            # A run folder left by a start that was killed before its container existed.
            return self.archive_current() if not self.check_mode else ""
        if not self.ours(info):
            self.messages.append(problem("E_STOP", self.host, "a container named %s exists without the label %s; "
                                         "it was not stopped" % (self.p["name"], self.p["label"]),
                                         "It is not this role's: stop it by hand if it should go."))
            return ""
        archive = ""
        if self.check_mode:
            self.changed = True
            return ""
        if info.get("State", {}).get("Running"):
            self.drain()
        self.docker("update", "--restart", "no", self.p["name"])
        self.docker("stop", "--time", self.p["stop_grace"], self.p["name"])
        archive = self.archive_current()
        self.docker.remove(self.p["name"])
        self.changed = True
        return archive

    def drain(self):
        grace = int(self.p["stop_grace"])
        status, body = self.http("/health")
        live = None
        if status == 200:
            try:
                live = json.loads(body).get("live", {}).get("connections")
            except (ValueError, AttributeError):
                live = None
        how = "/health"
        if live is None:
            # With API keys /health gives only its status: count the API's TCP connections.
            live, how = open_connections(self.p["port"]), "open connections to port %s" % self.p["port"]
        if not live:
            return
        # A connection count (API keys hide /health's) cannot tell an idle keep-alive connection
        # (Prometheus' scrapes, a gateway's pool) from a request: it says connections, and waits the same.
        what = "request(s)" if how == "/health" else "connection(s)"
        self.messages.append("%d %s still open on %s (%s); rank 0 gets up to %d s to finish them before the stop"
                             % (live, what, self.host, how, grace))
        deadline = self.clock() + grace
        while self.clock() < deadline:
            self.sleep(1)
            if how == "/health":
                status, body = self.http("/health")
                try:
                    live = json.loads(body).get("live", {}).get("connections", 0) if status == 200 else 0
                except (ValueError, AttributeError):
                    live = 0
            else:
                live = open_connections(self.p["port"])
            if not live:
                return

    def archive_current(self):
        current = os.path.join(self.logs_dir, "current")
        if not os.path.islink(current):
            return ""
        source = os.path.join(self.logs_dir, os.readlink(current))
        dest = os.path.join(self.logs_dir, "%s-%s.tar.gz" % (self.p["name"], _now()))
        extra = 0
        while os.path.lexists(dest):
            extra += 1
            dest = os.path.join(self.logs_dir, "%s-%s.%d.tar.gz" % (self.p["name"], _now(), extra))
        if os.path.isdir(source):
            with tarfile.open(dest, "w:gz") as tar:
                tar.add(source, arcname=os.path.basename(source))
            os.chmod(dest, 0o644)
            for root, dirs, files in os.walk(source, topdown=False):
                for name in files:
                    os.unlink(os.path.join(root, name))
                for name in dirs:
                    os.rmdir(os.path.join(root, name))
            os.rmdir(source)
        else:
            dest = ""
        os.unlink(current)
        return dest

    # ------------------------------------------------------------------ start
    def argument_check(self, image, window):
        runner_text = self.runner(window)
        folder = os.path.join(self.state_dir, "argument-check")
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        with open(os.path.join(folder, "runner.sh"), "w") as out:
            out.write(runner_text)
        os.chmod(os.path.join(folder, "runner.sh"), 0o755)
        name = self.p["name"] + "-argument-check"
        self.remove_check_container(name)
        check_key = os.path.join(folder, "api-key")
        if self.p["api_key"]:
            write_private(check_key, engine_args.api_key_file_text(self.p["api_key"]))
        try:
            rc, out, err = self.docker("run", "--name", name, "--network", "none",
                                       "--label", self.p["label"] + ARGUMENT_CHECK_LABEL + "=true",
                                       *(self.mounts(folder, argument_check=True)
                                         + [image, "/bin/bash", engine_args.LOG_MOUNT + "/runner.sh", "--argument-check"]))
        finally:
            self.docker.remove(name)
            if os.path.exists(check_key):
                os.unlink(check_key)
        verdict = argument_check_verdict(rc, out + err)
        if verdict is None:
            return
        kind, said = verdict
        if kind == "flags":
            flags = " ".join(engine_args.shared_flags(self.settings(), window, extra_args=self.p["engine_args"]))
            self.fail("E_SETTINGS", "the engine rejects the flags the settings map to (exit 2): %s. Flags: %s"
                      % (said, flags),
                      "Fix the setting behind the named flag (or rank_container_engine_args); nothing running was touched.")
        if kind == "load":
            self.fail("E_IMAGE", "the engine in %s could not start for the argument check (exit %s): %s" % (image, rc, said),
                      "Fix what the engine names: an image built for this card (the tensorfold_image role, or "
                      "rank_container_image) or the rank_container_env setting it reads; nothing running was touched.")
        self.fail("E_START", "docker could not run the argument check (exit %s): %s" % (rc, said),
                  "Fix what docker names (the image, a mount under %s, the Docker daemon); nothing running was touched."
                  % self.state_dir)

    def remove_check_container(self, name):
        """Remove a throw-away argument check container an earlier start left behind (a killed
        run): only one carrying our argument check label. A container of that name without it is
        someone else's: it is left alone and the start fails before anything is touched (docker
        would refuse the name, and the check's own removal afterwards would take that container)."""
        found = self.docker.inspect(name)
        if found is None:
            return
        labels = (found.get("Config") or {}).get("Labels") or {}
        if labels.get(self.p["label"] + ARGUMENT_CHECK_LABEL) != "true":
            self.fail("E_START", "a container named %s exists without the label %s%s; it is left alone"
                      % (name, self.p["label"], ARGUMENT_CHECK_LABEL),
                      "Remove or rename that container (the engine's argument check runs under that name); "
                      "nothing running was touched.")
        self.docker.remove(name)

    def docker_run(self, image, window, run_dir, fingerprint):
        p = self.p
        labels = ((p["label"], "true"), (p["label"] + ".settings", fingerprint), (p["label"] + ".context", str(window)))
        argv = engine_args.container_run_argv(p["name"], image, p["env"], p["ulimits"], labels,
                                              self.cards()["device_ids"] if p["gpu_requests"] else None,
                                              self.mounts(run_dir))
        rc, out, err = self.docker(*argv)
        if rc != 0:
            said = (err or out).strip()
            if NO_GPU_DRIVER in said:
                # dockerd serves --gpus with nvidia-container-runtime-hook found on its PATH at its start;
                # the nvidia runtime in daemon.json does not serve it.
                self.fail("E_NVIDIA_RUNTIME", "docker run --gpus was refused, dockerd has no GPU device driver: %s" % said,
                          "Install the nvidia-container-toolkit package (it has nvidia-container-runtime-hook, which "
                          "dockerd needs on its PATH for --gpus; the nvidia_toolkit role installs it) and restart Docker.")
            self.fail("E_START", "docker could not start the container: %s" % said)

    def wait(self):
        """'up', 'ended: ...', 'timeout' or 'warming' (the time ran out while /health said ok but
        still warming), asking /health every WAIT_POLL_S seconds (a start is over as soon as the
        API serves warmed up) and docker whether the container still runs once a second."""
        deadline = self.clock() + int(self.p["wait_timeout"])
        # `docker run -d` has just said the container started: docker is first asked a second in.
        next_inspect = self.clock() + 1
        while True:
            status, body = self.http("/health", timeout=2)
            if health_ready(status, body) and (not self.p["api_key"] or says_warming(body) is not None
                                               or self.answers_a_request(deadline)):
                return "up"
            if self.clock() >= next_inspect:
                info = self.docker.inspect(self.p["name"])
                state = (info or {}).get("State", {})
                if not state.get("Running"):
                    return "ended: status %s, exit code %s" % (state.get("Status", "missing"), state.get("ExitCode", "unknown"))
                next_inspect = self.clock() + 1
            if self.clock() >= deadline:
                return "warming" if health_ok(status, body) else "timeout"
            self.sleep(WAIT_POLL_S)

    def answers_a_request(self, deadline):
        """Whether the engine answers a one-token request (within the start's time). Asked only when
        /health cannot say whether the engine still warms up: with API keys it answers only its
        status. Any answer but 429/503 counts (the smoke test judges answers); no answer by the
        deadline does not."""
        left = deadline - self.clock()
        if left <= 0:
            return False
        status, unused = self.http("/v1/chat/completions", timeout=max(1, int(left)), key=self.p["api_key"] or None,
                                   body=readiness_request(self.settings().get("tensorfold_served_name", "GLM-5.3-Flash")))
        return status is not None and status not in (429, 503)

    def key_differs(self):
        """Whether the run's API key is not the one the container started last reads (place_key
        writes the file only then). Going without a key changes the fingerprint ("keyed") instead."""
        return bool(self.p["api_key"]) and not engine_args.api_key_file_holds(_read(self.key_path), self.p["api_key"])

    def place_key(self):
        """Give the key file the run's key (or remove it) only now, with the old container gone and
        the new one about to start: the file then always holds the key of the container started
        last, which is what a later start (key_changed) and the fast path (converged_info) compare
        with the run's key. Written earlier, a start ending before the replace (E_LOCK, E_IMAGE,
        E_SETTINGS, interrupted) would leave the old container serving a revoked key unnoticed."""
        if self.p["api_key"]:
            write_private(self.key_path, engine_args.api_key_file_text(self.p["api_key"]))
        elif os.path.exists(self.key_path):
            os.unlink(self.key_path)

    def attempt(self, image, window, number):
        stamp = _now()
        run_dir = os.path.join(self.logs_dir, "%s-%s-%d" % (self.p["name"], stamp, number))
        extra = 0
        while os.path.lexists(run_dir):  # two starts within a second
            extra += 1
            run_dir = os.path.join(self.logs_dir, "%s-%s-%d.%d" % (self.p["name"], stamp, number, extra))
        os.makedirs(run_dir, 0o755)
        text = self.runner(window)
        with open(os.path.join(run_dir, "runner.sh"), "w") as out:
            out.write(text)
        os.chmod(os.path.join(run_dir, "runner.sh"), 0o755)
        current = os.path.join(self.logs_dir, "current")
        if os.path.islink(current) or os.path.exists(current):
            os.unlink(current)
        os.symlink(os.path.basename(run_dir), current)
        self.write_record(image, window)
        # No container of that name is left here: stop() removed the one replaced, and a retry
        # removes the refused one before it comes back.
        self.place_key()
        self.fingerprint_started = self.fingerprint(text, image)
        self.docker_run(image, window, run_dir, self.fingerprint_started)
        self.changed = True
        outcome = self.wait()
        logs = [_read(os.path.join(run_dir, "rank%d.log" % rank)) for rank in (0, 1)]
        return outcome, logs, run_dir

    def tails(self, logs):
        lines = int(self.p["log_tail_lines"])
        return " ".join("--- rank%d.log (last %d lines) --- %s" % (rank, lines, _tail(text, lines))
                        for rank, text in enumerate(logs))

    def start(self, restart=False):
        p = self.p
        for folder in (self.state_dir, self.logs_dir, p["cache_dir"]):
            if not os.path.isdir(folder) and not self.check_mode:
                os.makedirs(folder, 0o755)
        info = self.docker.inspect(p["name"])
        if info is not None and not self.ours(info):
            self.fail("E_START", "a container named %s exists without the label %s; it is left alone"
                      % (p["name"], p["label"]), "Remove or rename that container, or set tensorfold_container_name.")
        record_ = self.read_record()
        image = p["image"] or ((info or {}).get("Config", {}).get("Image")) or record_.get("image", "")
        if not image:
            if restart:
                self.messages.append("nothing to restart on %s: no engine container was ever started there. "
                                     "Deploy it with the full site playbook (without --tags restart)." % self.host)
                return self.result("not_deployed")
            self.fail("E_IMAGE", "no image to run: rank_container_image is empty, the tensorfold_image role set no "
                      "tensorfold_image_ref and this host has no record of a started image",
                      "Run the whole site playbook (the image role builds it) or set rank_container_image.")
        if self.replace_deferred(info, image, restart):
            pending = self.served(self.window()[0], 0, info)
            pending["status"] = "replace_pending"
            return pending
        key_changed = self.key_differs()
        self.key = self.fit_key(image)
        window, cached = self.window()
        labels = (info or {}).get("Config", {}).get("Labels") or {}
        up_to_date = (not restart and info is not None and info.get("State", {}).get("Running")
                      and labels.get(p["label"] + ".settings") == self.fingerprint(self.runner(window), image)
                      and not key_changed)
        if up_to_date:
            self.keep_restarting(info)
            return self.served(window, 0, info)
        if info is not None and not info.get("State", {}).get("Running") and info.get("RestartCount", 0):
            self.warnings.append(record("W_RESTARTS", self.host, "the engine container had ended (exit code %s) after "
                                        "docker restarted it %d time(s); starting it again"
                                        % (info.get("State", {}).get("ExitCode"), info.get("RestartCount", 0))))
        if self.check_mode:
            self.changed = True
            self.messages.append("would %s %s with a %d-token window" % ("restart" if info else "start", p["name"], window))
            return self.result("would_start", context=window)
        if not self.docker.image_exists(image):
            self.fail("E_IMAGE", "the image %s is not on this host" % image,
                      "Run the whole site playbook (the image role builds it) or set rank_container_image.")
        lock = Lock(os.path.join(self.state_dir, "start.lock"))
        lock_wait = p["lock_wait"] if p.get("lock_wait") is not None else longest_start_s(p["wait_timeout"], p["stop_grace"])
        if not lock.acquire(lock_wait, self.sleep, self.clock):
            self.fail("E_LOCK", "another start holds the start lock %s (waited %s s; last taken by %s)"
                      % (lock.path, lock_wait, lock.owner()))
        try:
            # The container being replaced was started from this image with exactly these flags
            # (its settings label): the engine accepted them then, a restart need not ask again.
            if labels.get(p["label"] + ".settings") != self.fingerprint(self.runner(window), image):
                self.argument_check(image, window)
            self.stop(self.docker.inspect(p["name"]))
            return self.start_locked(image, window, cached)
        finally:
            lock.release()

    def start_locked(self, image, window, cached):
        p = self.p
        auto = str(p["context"]).strip().lower() == "auto"
        refusals, budgets = [], []
        # With auto, a refusal is answered with a start at the window the engine's figures allow:
        # always after a refusal of the model's window (it names no memory figures, so it does not
        # count as a memory start) and after the first memory refusal; after the second only when
        # it names other memory figures than the first: the other rank's, which the first refusal
        # cut off by closing the link. Each retry asks for less, so it never loops.
        for number in range(1, MAX_STARTS + 1):
            outcome, logs, run_dir = self.attempt(image, window, number)
            if outcome == "up":
                break
            text = "\n".join(logs)
            fit = context_fit.analyse(text, window, str(p["parallel"]), page_rows=p["page_rows"])
            if fit["refused"]:
                refusals.append(fit["reason"])
                if fit["kind"] != "window":
                    budgets.append(context_fit.budget(fit["reason"]))
                other_figures = budgets and budgets[-1] is not None and budgets[-1] not in budgets[:-1]
                retry = (auto and (fit["kind"] == "window" or len(budgets) == 1
                                   or (len(budgets) < MEMORY_STARTS and other_figures))
                         and fit["context"] is not None and fit["context"] < window)
                if retry:
                    self.docker.remove(p["name"])
                    window = fit["context"]
                    continue
                if fit["kind"] == "weights":
                    self.fail("E_GPU_MEMORY", "the engine refused to start: %s. Rank log tails: %s"
                              % (fit["reason"], self.tails(logs)),
                              "The weights do not fit: free GPU memory, lower tensorfold_memory_reserve_gib, "
                              "or set tensorfold_vision: false or tensorfold_drafter: mtp.")
                fits = context_fit.what_fits(text, window, str(p["parallel"]), page_rows=p["page_rows"])
                said, todo = fit_advice(fit["kind"], fits, window, auto, p["page_rows"])
                self.fail("E_FIT", "the engine refused to start: %s%s. Rank log tails: %s"
                          % (". Then, at the window its figures allowed: ".join(refusals),
                             "; " + said if said else "", self.tails(logs)), todo)
            if outcome == "timeout":
                self.fail("E_API", "the API did not answer within %s s. %s" % (p["wait_timeout"], self.tails(logs)))
            if outcome == "warming":
                said = ("a one-token request with the API key got no answer (with keys /health does not say whether "
                        "the engine still warms up)" if p["api_key"] else "its /health still says the engine is warming up")
                self.fail("E_API", "the API answers, but after %s s %s. %s" % (p["wait_timeout"], said, self.tails(logs)),
                          "Raise tensorfold_wait_timeout if warming up takes that long on this box.")
            self.fail("E_START", "the container ended (%s) before the API answered. %s" % (outcome[7:], self.tails(logs)))
        if auto and number > 1:
            # Recorded only once a start at this window serves: a window the engine refused in
            # the end (E_FIT) is never the next start's first.
            context_fit.write_cache_entry(self.fit_file, self.key, window)
        self.keep_restarting(None)
        self.save_models(run_dir)
        return self.served(window, number, None)

    def will_replace(self, info, image):
        """True when a start would stop this running container of ours for a new one: its settings
        fingerprint (runner, image, mounts, env...) differs from its label, or the API key changed."""
        if info is None or not info.get("State", {}).get("Running") or not self.ours(info):
            return False
        self.key = self.fit_key(image)
        window = self.window()[0]
        labels = info.get("Config", {}).get("Labels") or {}
        return labels.get(self.p["label"] + ".settings") != self.fingerprint(self.runner(window), image) or self.key_differs()

    def replace_deferred(self, info, image, restart):
        """With defer_replace (a gateway is in front of the boxes), a start that would replace the
        running container leaves it serving, untouched: the rolling restart step replaces it,
        drained at the gateway, one box at a time. In check mode the start says so instead."""
        if restart or not self.p.get("defer_replace") or not self.will_replace(info, image):
            return False
        if self.check_mode:
            self.messages.append("%s: the settings or the image changed; %s would be drained at the gateway, "
                                 "then restarted" % (self.host, self.p["name"]))
            return False
        self.messages.append("%s: the settings or the image changed; %s keeps serving until the rolling restart "
                             "step drains it at the gateway and replaces it" % (self.host, self.p["name"]))
        return True

    def keep_restarting(self, info):
        """Once the API answers, docker restarts the container after a crash or a daemon restart,
        a bounded number of times (restart_policy); a start never loops."""
        policy = self.p["restart_policy"]
        if info is not None:
            current = info.get("HostConfig", {}).get("RestartPolicy", {})
            name, count = current.get("Name", ""), current.get("MaximumRetryCount", 0)
            if (name if not count else "%s:%d" % (name, count)) == policy:
                return
        self.changed = True
        if not self.check_mode:
            self.docker("update", "--restart", policy, self.p["name"])

    def save_models(self, run_dir):
        status, body = self.http("/v1/models", key=self.p["api_key"] or None)
        if status == 200:
            with open(os.path.join(run_dir, "models.json"), "w") as out:
                json.dump(json.loads(body), out, indent=4, sort_keys=True)
                out.write("\n")

    def served(self, window, starts, info):
        """The result of a serving container: its streams from the startup line, and warnings.
        ``info`` is its docker inspect: the one this run read, or for the container it just started
        (``info=None``) its settings label and no restarts (its policy was "no" until it served)."""
        p = self.p
        log = _read(os.path.join(self.logs_dir, "current", "rank0.log"))
        streams, seen_window = engine_log.parse_startup(log)
        asked = 4 if str(p["parallel"]).lower() == "auto" else int(p["parallel"])
        if streams is not None and streams < asked:
            what = "%d streams came up at a %d-token window, %d were asked%s" % (
                streams, seen_window, asked, " (auto: the recipe expects four)" if str(p["parallel"]).lower() == "auto" else "")
            self.warnings.append(record("W_STREAMS", self.host, what))
        if OPEN_API in context_fit.latest_run(log):
            self.warnings.append(record("W_OPEN_API", self.host, "the engine serves port %s beyond loopback with no API "
                                        "key (its own warning in rank0.log): whoever reaches the port can use it" % p["port"]))
        if info is None:
            info = {"Config": {"Labels": {p["label"] + ".settings": self.fingerprint_started}}, "RestartCount": 0}
        restarts = info.get("RestartCount", 0)
        if restarts:
            self.warnings.append(record("W_RESTARTS", self.host, "docker restarted the engine container %d time(s) "
                                        "since its start (the restart policy allows %s)" % (restarts, p["restart_policy"])))
        served = self.result("running", context=seen_window or window, streams=streams, starts=starts)
        # The settings label of the container that serves: a deploy record keeps it (converged_info).
        served["fingerprint"] = ((info.get("Config") or {}).get("Labels") or {}).get(p["label"] + ".settings", "")
        return served

    def run(self, state):
        if state == "stopped":
            info = self.docker.inspect(self.p["name"])
            archive = self.stop(info)
            # Only a box that serves or served is marked: a stop where nothing was ever started changes nothing.
            if info is not None or os.path.exists(self.record_path):
                self.mark_stopped(True)
            return self.result("stopped", log_dir=archive)
        answer = self.start(restart=(state == "restarted"))
        if answer["status"] in ("running", "replace_pending"):
            self.mark_stopped(False)
        return answer

    def mark_stopped(self, stopped):
        """Keep the mark of a deliberate stop (STOPPED_MARK) while the engine is stopped on purpose."""
        if self.check_mode or stopped == os.path.exists(self.stopped_mark):
            return
        self.changed = True
        if not stopped:
            os.remove(self.stopped_mark)
            return
        if not os.path.isdir(self.state_dir):
            os.makedirs(self.state_dir, 0o755)
        with open(self.stopped_mark, "w") as out:
            out.write("stopped on purpose at %s\n" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())))


def run_module(module):
    """The engine_container module's whole run: ``module`` is its AnsibleModule, or box_module's
    stand-in when the action sends this file to the host (``on_box``); either ends in exit_json
    or fail_json with the same answer."""
    p = module.params
    try:
        engine_args.engine_names(p["settings"].get("tensorfold_engine_names"))
    except ValueError as err:
        module.fail_json(msg=problem("E_SETTINGS", p["host"], str(err)), code="E_SETTINGS")

    # Without the docker command a real run fails coded; a check run is a box whose Docker the
    # toolkit step would install, where every docker call fails as on a host without containers.
    docker = module.get_bin_path("docker")
    if docker is None and not module.check_mode:
        module.fail_json(msg=problem("E_DOCKER", p["host"], "the docker command is not on this host"), code="E_DOCKER")

    def run(argv):
        if docker is None:
            return 127, "", "docker: command not found"
        return module.run_command([docker] + list(argv[1:]))

    engine = EngineContainer(p, Docker(run), check_mode=module.check_mode, read_gpus=lambda: read_cards(module))
    try:
        result = engine.run(p["state"])
    except StartFailed as err:
        module.fail_json(msg=err.message, code=err.code, changed=engine.changed, messages=engine.messages)
    module.exit_json(changed=engine.changed, result=result, messages=engine.messages)


def on_box(params):
    """engine_container's answer, run by the box reader with the host's Python (never in check mode)."""
    return box_module.answer(run_module, params)
