#!/usr/bin/env python3
"""Stand-in for TensorFold's Zig engine, ``tensorfold-native`` (tests only).

The real engine serves GLM-5.3-Flash on two Blackwell GPUs from a 164 GiB checkpoint; neither
exists on a test box. This program keeps the engine's contract (its public sources and the
two-rank recipes built on it) so the product's runner script and container run unchanged around it:

* the command line: ``serve MODEL [flags]``, ``--version``, ``capabilities --json``; flag errors
  print usage and exit 2; load failures print ``tensorfold: <problem>`` and exit 1, including
  ``serve /nonexistent/argument-check`` ("neither a directory nor a Hugging Face repo id") and a
  missing kernel set (``TENSORFOLD_CUDA_KERNELS``);
* two tensor-parallel ranks meeting over TCP on ``--master:--master-port`` (rank 0 listens, rank 1
  retries every 200 ms, each waits up to 10 minutes, ``join_wait_s``, or with ``join_wait: env``
  ``TF_TP_TIMEOUT_S`` seconds, default 300: the contract names both), the SHA-256 settings-fingerprint
  exchange and its mismatch message, ``rank N: settings agreed, NCCL joined``; the control link
  closing makes the other rank log ``rank N: <reason>; exiting`` and exit 3 (exit 0 when no stream
  was open; whether rank 1, which serves no HTTP, counts rank 0's streams as its own is the switch
  ``rank1_streams``: ``none``, it always exits 0 then, or ``shared``, it exits 3 when one was open);
  SIGTERM logs the stop line and exits 0;
* the startup lines and the memory-fit refusals, word for word, from a memory model (per rank:
  GPU memory, weights by DENSE/HEAD packing, vision tower on rank 0, drafter, KV cost per token);
* rank 0's HTTP API: /health (with live.connections), /v1/models, /v1/chat/completions (stream and
  not, a deterministic reply at a set token rate, image_url parts), /v1/completions, /metrics,
  Bearer / x-api-key auth with the engine's 401 body, the 404 body, context overflow 400.
* for the bench and monitoring: a decode speed per stream (``tokens_per_s``) and a prefill speed
  (``prefill_tokens_per_s``), each token sent on a schedule so a client measures exactly them;
  ``ignore_eos`` gives a reply of max_tokens tokens; requests beyond the streams wait for one;
  /metrics counts requests, prompt and generated tokens, the queue and the running streams.

The contract names no flag or variable for KV_PAGES, DENSE, HEAD, ABSORB_MMA and W8A8, so which
environment variable the stand-in reads for each is a switch, ``knob_names`` (knob -> name): a
scenario can give the stand-in names the collection's defaults do not send, to see the operator's
``tensorfold_engine_names`` at work, and a variable it does not read is ignored, as any program
ignores one. Its defaults: ``TF_GLM_DENSE`` for DENSE, the name the public sibling recipes built on
this engine export; ``TENSORFOLD_KV_PAGES``, ``TENSORFOLD_HEAD``, ``TENSORFOLD_ABSORB_MMA`` and
``TENSORFOLD_W8A8`` for the others, for which no public source gives a name. Bad values are flag
errors (exit 2).

The memory model and timing come from a JSON file named by ``TENSORFOLD_STANDIN_CONFIG`` and from
``TENSORFOLD_STANDIN_<KEY>`` variables (upper-case keys of ``DEFAULTS``), so each test scenario
sets the card it simulates. ``fail_rank``/``fail_after_s`` make one rank kill itself (SIGKILL)
that long after the ranks agree, which is how tests reproduce a rank dying. ``paged_parallel``
chooses how a numeric ``--parallel`` that does not fit is met with KV pages on (``refuse``, the
contract; ``admit``, fewer streams). ``warm_s`` is how long after it serves /health says
``"warming": true`` (the contract has the field and no duration; 0, the default, never). ``key_file``
chooses how the key file's text is read (``trim``; ``verbatim``, where a newline is part of the key). ``argv_dir`` records each rank's argv as ``rankN.argv.json``.

Two test switches for the gateway (tests only, no engine interface): ``wedge_file`` names a file
whose presence wedges the engine the way operators report real engines wedging: ``/health`` and
``/v1/models`` keep answering while every generation request that arrives never finishes (no byte
of a reply is sent); ``request_log`` names a JSON-lines file that gets one ``start`` line when a
generation request arrives and one ``end`` line when its reply is done, each with the time, the
request's id and its ``User-Agent``, so a test can prove which box received which request when.

Standard library only (Python 3.11).
"""

import argparse
import hashlib
import ipaddress
import json
import os
import re
import signal
import socket
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "tensorfold-native 0.6.4+standin (f350cd3e, zig 0.17.0, sm_120)"
GIB = 1024 ** 3

DEFAULTS = {
    "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "gpu_free_gib": 94.5,          # free memory on each card at start
    "model_gib": 76.0,             # a rank's share of the expert/attention weights
    "dense_gib": {"bf16": 6.0, "q8": 3.0, "q6": 2.3, "q4": 1.5},
    "head_gib": {"bf16": 1.2, "q8": 0.6, "q6": 0.45, "q4": 0.3},
    "vision_gib": 1.8,             # rank 0 only, with --vision
    "dflash2_gib": 2.5,            # --drafter DIR
    "mtp_gib": 1.0,                # the checkpoint's MTP head (no --drafter, drafts on)
    "kv_kib_per_token": {"fp8": 8, "bf16": 16},
    "model_window": 1048576,
    "tokens_per_s": 200.0,         # decode speed of each stream (tokens a second)
    "prefill_tokens_per_s": 0.0,   # prompt tokens read a second before the first token (0: at once)
    "load_s": 1.0,                 # seconds "loading" after the ranks agree
    # Seconds after it serves during which /health (the answer without keys) says "warming": true;
    # the contract names the field, not how long an engine warms up (0: never warming).
    "warm_s": 0.0,
    "fail_rank": -1,               # a rank that kills itself once serving (-1: none)
    "fail_after_s": 2.0,
    # How long each rank waits for the other to join. The contract names two readings: 10 minutes
    # ("fixed": join_wait_s, which tests shorten) and TF_TP_TIMEOUT_S with its default of 300 s
    # ("env"); join_wait chooses one, and the collection must work with either.
    "join_wait": "fixed",
    # Whether rank 1 counts the streams rank 0 serves as open when the control link closes: "none"
    # (it serves none, so it exits 0) or "shared" (tensor-parallel, it computes every one of them,
    # so it exits 3 when one was open). The contract says "exit 3 (exit 0 if no stream was open)"
    # and no more: the collection must work with either.
    "rank1_streams": "none",
    "join_wait_s": 600.0,
    # How a numeric --parallel P that does not fit is met with shared KV pages on: "refuse" (the
    # contract: P streams must fit, pages on or off) or "admit" (serve as many as fit, fewer than
    # P, so the role's W_STREAMS path can be seen). Without pages it is always refused.
    "paged_parallel": "refuse",
    # How the --api-key-file text is read; the contract asks for mode 600 and says no more: "trim"
    # (keys at commas and line ends, blanks stripped) or "verbatim" (the text as it is, split at
    # commas only: a trailing newline is part of the last key).
    "key_file": "trim",
    # A folder to record each rank's argv in (rankN.argv.json), e.g. the run's /logs; "" = off.
    "argv_dir": "",
    "wedge_file": "",              # while this file exists, generation requests never finish
    "request_log": "",             # JSON lines: each generation request's start and end
    # The variable read for each knob the contract names none for (see the docstring).
    "knob_names": {"kv_pages": "TENSORFOLD_KV_PAGES", "dense": "TF_GLM_DENSE", "head": "TENSORFOLD_HEAD",
                   "absorb_mma": "TENSORFOLD_ABSORB_MMA", "w8a8": "TENSORFOLD_W8A8"},
}
KNOB_DEFAULTS = {"kv_pages": "0", "dense": "q8", "head": "bf16", "absorb_mma": "0", "w8a8": "0"}

MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
PACKINGS = ("bf16", "q8", "q6", "q4")
AUTH_BODY = {"error": {"message": "A valid API key is required", "type": "invalid_request_error",
                       "param": None, "code": "invalid_api_key"}}


def knob_name(knob):
    names = dict(DEFAULTS["knob_names"])
    names.update(load_config().get("knob_names") or {})
    return names[knob]


def knob(knob_key):
    """This knob's value as the stand-in reads it: its variable under the names in force."""
    return os.environ.get(knob_name(knob_key), KNOB_DEFAULTS[knob_key])


def log(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def load_config():
    config = json.loads(json.dumps(DEFAULTS))
    path = os.environ.get("TENSORFOLD_STANDIN_CONFIG")
    if path and os.path.exists(path):
        with open(path) as handle:
            config.update(json.load(handle))
    for key, default in DEFAULTS.items():
        raw = os.environ.get("TENSORFOLD_STANDIN_" + key.upper())
        if raw is None:
            continue
        if isinstance(default, dict):
            config[key] = json.loads(raw)
        elif isinstance(default, str):
            config[key] = raw
        elif isinstance(default, int) and not isinstance(default, bool):
            config[key] = int(raw)
        else:
            config[key] = float(raw)
    return config


# ---------------------------------------------------------------------------- command line
class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    parser = Parser(prog="tensorfold-native", add_help=False,
                    usage="tensorfold-native serve MODEL [flags] | --version | capabilities --json")
    parser.add_argument("command", nargs="?")
    parser.add_argument("model", nargs="?")
    parser.add_argument("--version", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--name", default="GLM-5.3-Flash")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8020)
    parser.add_argument("--context", type=int, default=0)
    parser.add_argument("--parallel", default="4")
    parser.add_argument("--max-tokens", type=int, default=32768)
    parser.add_argument("--thinking", dest="thinking", action="store_true", default=False)
    parser.add_argument("--no-thinking", dest="thinking", action="store_false")
    parser.add_argument("--reasoning-effort", choices=["low", "medium", "high", "xhigh"], default="high")
    parser.add_argument("--kv-dtype", choices=["fp8", "bf16"], default="fp8")
    parser.add_argument("--vision", action="store_true")
    parser.add_argument("--no-drafts", action="store_true")
    parser.add_argument("--drafter")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--master")
    parser.add_argument("--master-port", type=int)
    parser.add_argument("--device", type=int)
    parser.add_argument("--api-key", action="append", default=[])
    parser.add_argument("--api-key-file")
    parser.add_argument("--metrics-open", action="store_true")
    return parser


def check_flags(args):
    """Flag errors the engine reports before touching a GPU or the model (exit 2)."""
    if args.parallel != "auto":
        if not args.parallel.isdigit() or not 1 <= int(args.parallel) <= 8:
            raise UsageError("--parallel must be 1 to 8 or auto, not %s" % args.parallel)
    if args.context < 0:
        raise UsageError("--context must be 0 or a positive number of tokens")
    if args.max_tokens < 1:
        raise UsageError("--max-tokens must be positive")
    if not 1 <= args.port <= 65535:
        raise UsageError("--port must be 1 to 65535")
    if args.tp not in (1, 2):
        raise UsageError("--tp must be 1 or 2")
    if args.rank not in range(args.tp):
        raise UsageError("--rank must be below --tp")
    if args.tp == 2:
        if not args.master or args.master_port is None:
            raise UsageError("--tp 2 needs --master IP and --master-port N")
        try:
            ipaddress.ip_address(args.master)
        except ValueError:
            raise UsageError("--master must be an IP address, not a host name: %s" % args.master)
        if not 1 <= args.master_port <= 65534:
            raise UsageError("--master-port must be 1 to 65534")
    if args.no_drafts and args.drafter:
        raise UsageError("--no-drafts and --drafter exclude each other")
    for key in ("dense", "head"):
        if knob(key) not in PACKINGS:
            raise UsageError("%s must be bf16, q8, q6 or q4, not %s" % (knob_name(key), knob(key)))
    for key in ("kv_pages", "absorb_mma", "w8a8"):
        if knob(key) not in ("0", "1"):
            raise UsageError("%s must be 0 or 1" % knob_name(key))
    reserve = os.environ.get("TENSORFOLD_MEMORY_RESERVE_GIB", "4")
    try:
        float(reserve)
    except ValueError:
        raise UsageError("TENSORFOLD_MEMORY_RESERVE_GIB must be a number of GiB")


class LoadError(Exception):
    pass


def api_keys(args):
    keys = list(args.api_key)
    if args.api_key_file:
        try:
            mode = stat.S_IMODE(os.stat(args.api_key_file).st_mode)
        except OSError as err:
            raise LoadError("cannot read --api-key-file %s: %s" % (args.api_key_file, err.strerror))
        if mode & 0o077:
            raise LoadError("--api-key-file %s must be mode 600, not %o" % (args.api_key_file, mode))
        with open(args.api_key_file) as handle:
            text = handle.read()
        if load_config()["key_file"] == "verbatim":
            keys += [k for k in text.split(",") if k]
        else:
            keys += [k.strip() for k in text.replace(",", "\n").splitlines() if k.strip()]
    keys += [k.strip() for k in os.environ.get("TENSORFOLD_API_KEY", "").split(",") if k.strip()]
    return keys


def snapshot_hash(model):
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(model):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            digest.update(("%s %d\n" % (os.path.relpath(path, model), os.path.getsize(path))).encode())
    return digest.hexdigest()[:16]


def settings_text(args):
    own = open(os.path.abspath(__file__), "rb").read()
    drafts = "none" if args.no_drafts else ("dflash2:" + args.drafter if args.drafter else "mtp")
    return ("checkpoint=%s snapshot=%s context=%d parallel=%s drafts=%s kv=%s kv_pages=%s dense=%s head=%s "
            "kernels=%s absorb_mma=%s w8a8=%s binary=%s" % (
                args.model, snapshot_hash(args.model), args.context, args.parallel, drafts, args.kv_dtype,
                knob("kv_pages"), knob("dense"), knob("head"), os.environ.get("TENSORFOLD_CUDA_KERNELS", ""),
                knob("absorb_mma"), knob("w8a8"),
                hashlib.sha256(own).hexdigest()[:16]))


# ---------------------------------------------------------------------------- memory model
def plan_memory(args, config, rank):
    """Return (window, streams, per_stream_gib, left_gib, model_gib, reserve) or raise LoadError
    with the engine's refusal text."""
    reserve = float(os.environ.get("TENSORFOLD_MEMORY_RESERVE_GIB", "4"))
    free = float(config["gpu_free_gib"])
    limit = os.environ.get("TENSORFOLD_CUDA_MEMORY_LIMIT_GB")
    extra = ""
    if limit:
        free = min(free, float(limit))
        extra = ", capped by TENSORFOLD_CUDA_MEMORY_LIMIT_GB=%s" % limit
    weights = (float(config["model_gib"]) + float(config["dense_gib"][knob("dense")])
               + float(config["head_gib"][knob("head")]))
    extras = 0.0
    if args.vision and rank == 0:
        extras += float(config["vision_gib"])
    if not args.no_drafts:
        extras += float(config["dflash2_gib"] if args.drafter else config["mtp_gib"])
    model = weights + extras
    if model > free - reserve:
        raise LoadError(
            "the checkpoint's %.1f GiB of weights do not fit the %.1f GiB the CUDA memory budget grants "
            "(%.1f GiB free less a %.1f GiB reserve%s); free device memory or adjust "
            "TENSORFOLD_MEMORY_RESERVE_GIB / TENSORFOLD_CUDA_MEMORY_LIMIT_GB"
            % (model, free - reserve, free, reserve, extra))
    window = args.context or int(config["model_window"])
    if window > int(config["model_window"]):
        raise LoadError("--context %d exceeds this model's %d-token window" % (window, int(config["model_window"])))
    left = free - reserve - model
    per_stream = window * float(config["kv_kib_per_token"][args.kv_dtype]) * 1024 / GIB
    if per_stream > left:
        raise LoadError(
            "the CUDA memory budget fits no stream: one at a %d-token window takes %.2f GiB, and %.2f GiB is "
            "left after the model's %.2f GiB and the %.1f GiB reserve; lower --context, or free device memory"
            % (window, per_stream, left, model, reserve))
    fit = int(left // per_stream)
    paged = knob("kv_pages") == "1"
    if args.parallel == "auto":
        streams = min(8, fit)
    else:
        asked = int(args.parallel)
        if asked > fit and (not paged or config["paged_parallel"] != "admit"):
            raise LoadError(
                "--parallel %d needs %.2f GiB for its streams at a %d-token window, and the CUDA memory budget "
                "leaves %.2f GiB: serve --parallel %d, or lower --context"
                % (asked, asked * per_stream, window, left, fit))
        # Only with paged_parallel "admit": as many streams run at once as full windows fit.
        streams = min(asked, fit)
    return window, streams, per_stream, left, model, reserve


# ---------------------------------------------------------------------------- two ranks
class Link(object):
    """The ranks' control link: fingerprint exchange, then a watch for the other rank leaving."""

    def __init__(self, args, timeout):
        self.args = args
        self.timeout = timeout
        self.sock = None
        self.goodbye = False
        self.peer_streams = 0  # the streams the other rank last said it had open ("open N")
        self.sending = threading.Lock()

    def connect(self):
        addr = "%s:%d" % (self.args.master, self.args.master_port)
        deadline = time.time() + self.timeout
        if self.args.rank == 0:
            log("rank 0: waiting for rank 1 on %s" % addr)
            server = socket.socket(socket.AF_INET6 if ":" in self.args.master else socket.AF_INET)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                server.bind((self.args.master, self.args.master_port))
            except OSError as err:
                raise LoadError("cannot listen on %s: %s" % (addr, err.strerror))
            server.listen(1)
            server.settimeout(max(1.0, self.timeout))
            try:
                self.sock, _peer = server.accept()
            except socket.timeout:
                raise LinkError("rank 1 did not join within %d s" % self.timeout)
            finally:
                server.close()
        else:
            log("rank 1: joining rank 0 at %s" % addr)
            while True:
                try:
                    self.sock = socket.create_connection((self.args.master, self.args.master_port), timeout=2)
                    break
                except OSError:
                    if time.time() > deadline:
                        raise LinkError("rank 0 did not answer within %d s" % self.timeout)
                    time.sleep(0.2)
        self.sock.settimeout(None)

    def exchange(self, text):
        mine = hashlib.sha256(text.encode()).hexdigest()
        self.sock.sendall(("hello %s\n" % mine).encode())
        line = self._readline()
        if not line.startswith("hello "):
            raise LinkError("rank %d closed the control link" % (1 - self.args.rank))
        return line.split(" ", 1)[1] == mine

    def _readline(self):
        data = b""
        while not data.endswith(b"\n"):
            try:
                chunk = self.sock.recv(1)
            except OSError:  # a reset (the other rank died with our words unread) closes the link too
                chunk = b""
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace").strip()

    def send(self, word):
        try:
            with self.sending:  # request threads and the stop signal share the socket
                self.sock.sendall((word + "\n").encode())
        except OSError:
            pass

    def watch(self, on_close):
        def run():
            while True:
                line = self._readline()
                if line == "bye":
                    self.goodbye = True
                    continue
                if line.startswith("open "):
                    self.peer_streams = int(line.split()[1])
                    continue
                if not line:
                    on_close()
                    return
        thread = threading.Thread(target=run, daemon=True)
        thread.start()


class LinkError(Exception):
    pass


# TF_TP_TIMEOUT_S's default, as the contract names it (the join_wait "env" reading).
TP_TIMEOUT_DEFAULT_S = 300.0


def join_wait(config):
    """Seconds each rank waits for the other to join, under the join_wait reading in force."""
    if config["join_wait"] == "env":
        return float(os.environ.get("TF_TP_TIMEOUT_S") or TP_TIMEOUT_DEFAULT_S)
    if config["join_wait"] != "fixed":
        raise ValueError("join_wait must be fixed or env, not %r" % config["join_wait"])
    return float(config["join_wait_s"])


# ---------------------------------------------------------------------------- HTTP API
class State(object):
    def __init__(self, args, config, keys, streams, window):
        self.args = args
        self.config = config
        self.keys = keys
        self.streams = streams
        self.window = window
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.tokens = 0
        self.created = int(time.time())
        self.warm_until = 0.0  # set when it starts serving (warm_s)
        # Bench and metrics additions: prompt tokens read, requests waiting for a stream, and the
        # stream slots (--parallel) a request holds while it is read and answered.
        self.prompt_tokens = 0
        self.queued = 0
        self.running = 0
        self.slots = threading.Semaphore(max(1, streams))
        self.link = None  # the control link to rank 1 (two ranks)

    def tell_rank_1(self):
        """Tell rank 1 how many streams are open (called with the lock held): the ``shared``
        reading of rank1_streams needs it when the link closes."""
        if self.link is not None:
            self.link.send("open %d" % self.connections)


class Pacer(object):
    """Honest pacing: token N of a reply leaves at first + N / rate, not after N sleeps, so the
    rate a client measures is the configured one however long each write takes."""

    def __init__(self, config, prompt_tokens):
        self.rate = float(config["tokens_per_s"])
        prefill = float(config.get("prefill_tokens_per_s") or 0)
        self.first = time.monotonic() + (prompt_tokens / prefill if prefill > 0 else 0.0)
        self.count = 0

    def wait(self):
        due = self.first + (self.count / self.rate if self.rate > 0 else 0.0)
        self.count += 1
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def fixed_length(words, body, max_tokens):
    """``ignore_eos`` (the field load tools send for a fixed reply length) pads the reply to
    max_tokens words; the contract names no such field, so only a request that asks gets it."""
    if body.get("ignore_eos") and len(words) < int(max_tokens):
        words = words + ["token"] * (int(max_tokens) - len(words))
    return words


def reply_words(messages, max_tokens):
    """The deterministic reply: the same request always gets the same words."""
    last = ""
    images = 0
    for message in messages or []:
        content = message.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            images += sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url")
            content = " ".join(texts)
        if message.get("role") == "user":
            last = content or ""
    digest = hashlib.sha256(last.encode()).hexdigest()[:8]
    words = ["Hello", "from", "the", "GLM-5.3-Flash", "stand-in."]
    if images:
        words += ["I", "see", str(images), "image%s." % ("" if images == 1 else "s")]
    words += ["Your", "message", "had", str(len(last.split())), "words", "(%s)." % digest]
    return words[:max(1, int(max_tokens))]


def wedged(config):
    """True while the wedge switch (a file named by ``wedge_file``) is on."""
    return bool(config.get("wedge_file")) and os.path.exists(config["wedge_file"])


def hang_while_wedged(config):
    """A wedged engine accepts a request and never answers it: hold it while the switch is on."""
    while wedged(config):
        time.sleep(0.2)


def log_request(state, event, ident, **fields):
    """Append one line to the request log (``request_log``), if one is set."""
    path = state.config.get("request_log")
    if not path:
        return
    entry = {"event": event, "id": ident, "t": round(time.time(), 3)}
    entry.update(fields)
    line = json.dumps(entry, separators=(",", ":")) + "\n"
    with state.lock:
        with open(path, "a") as handle:
            handle.write(line)


def metrics_more(state):
    """The rest of /metrics (called with state.lock held): prompt tokens, queue and streams."""
    return ("# TYPE tensorfold_prompt_tokens_total counter\ntensorfold_prompt_tokens_total %d\n"
            "# TYPE tensorfold_queued_requests gauge\ntensorfold_queued_requests %d\n"
            "# TYPE tensorfold_running_streams gauge\ntensorfold_running_streams %d\n"
            "# TYPE tensorfold_max_streams gauge\ntensorfold_max_streams %d\n"
            % (state.prompt_tokens, state.queued, state.running, state.streams))


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "tensorfold-native"

        def log_message(self, fmt, *values):  # access log off, like the engine's default
            pass

        def _json(self, code, body, headers=None):
            data = json.dumps(body, separators=(",", ":")).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _authorised(self):
            if not state.keys:
                return True
            bearer = self.headers.get("Authorization", "")
            given = bearer[7:].strip() if bearer.startswith("Bearer ") else self.headers.get("x-api-key", "")
            if given in state.keys:
                return True
            self._json(401, AUTH_BODY, {"WWW-Authenticate": "Bearer"})
            return False

        def _not_found(self):
            self._json(404, {"error": {"message": "unknown path %s" % self.path.split("?")[0]}})

        def do_GET(self):
            path = self.path.split("?")[0]
            if path == "/health":
                if state.keys:
                    return self._json(200, {"status": "ok"})
                with state.lock:
                    live = {"connections": state.connections, "streams": state.streams}
                return self._json(200, {
                    "status": "ok", "model": state.args.name, "model_ids": [state.args.name],
                    "max_batch_size": state.streams, "warming": time.monotonic() < state.warm_until,
                    "memory": {"window": state.window, "streams": state.streams}, "live": live})
            if path == "/v1/models":
                if not self._authorised():
                    return None
                return self._json(200, {"object": "list", "data": [
                    {"id": state.args.name, "object": "model", "created": state.created, "owned_by": "tensorfold"}]})
            if path == "/metrics":
                if not state.args.metrics_open and not self._authorised():
                    return None
                with state.lock:
                    text = ("# TYPE tensorfold_requests_total counter\ntensorfold_requests_total %d\n"
                            "# TYPE tensorfold_generated_tokens_total counter\ntensorfold_generated_tokens_total %d\n"
                            "# TYPE tensorfold_live_connections gauge\ntensorfold_live_connections %d\n"
                            % (state.requests, state.tokens, state.connections)) + metrics_more(state)
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            return self._not_found()

        def do_POST(self):
            path = self.path.split("?")[0]
            if path not in ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"):
                return self._not_found()
            if not self._authorised():
                return None
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self._json(400, {"error": {"message": "the request body is not JSON",
                                                  "type": "invalid_request_error", "code": "invalid_json"}})
            if path == "/v1/completions":
                messages = [{"role": "user", "content": body.get("prompt", "")}]
            elif path == "/v1/responses":
                source = body.get("input", "")
                messages = source if isinstance(source, list) else [{"role": "user", "content": source}]
            else:
                messages = body.get("messages") or []
            has_image = any(isinstance(m.get("content"), list) and any(
                isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"]) for m in messages)
            if has_image and not state.args.vision:
                return self._json(400, {"error": {"message": "image input needs --vision",
                                                  "type": "invalid_request_error", "code": "unsupported_content"}})
            prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
            if prompt_tokens > state.window:
                return self._json(400, {"error": {
                    "message": "the prompt's %d tokens exceed the %d-token context" % (prompt_tokens, state.window),
                    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
            max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or state.args.max_tokens
            words = fixed_length(reply_words(messages, max_tokens), body, max_tokens)
            with state.lock:
                state.connections += 1
                state.tell_rank_1()
                state.requests += 1
                ident = state.requests
                state.queued += 1
            log_request(state, "start", ident, path=path, stream=bool(body.get("stream")),
                        agent=self.headers.get("User-Agent", ""))
            state.slots.acquire()  # a request beyond --parallel streams waits for one
            with state.lock:
                state.queued -= 1
                state.running += 1
                state.prompt_tokens += prompt_tokens
            self.pacer = Pacer(state.config, prompt_tokens)
            self.stream_open = True
            try:
                hang_while_wedged(state.config)
                if body.get("stream") and path == "/v1/chat/completions":
                    self._stream(body, words, prompt_tokens)
                else:
                    self._whole(path, words, prompt_tokens)
            finally:
                self._close_stream()
                state.slots.release()
                with state.lock:
                    state.running -= 1
                    state.tokens += len(words)
                log_request(state, "end", ident)
            return None

        def _close_stream(self):
            """The stream is no longer open: counted, and rank 1 told, before the reply's last bytes
            leave, so a client that has the whole reply never finds the stream still counted."""
            if self.stream_open:
                self.stream_open = False
                with state.lock:
                    state.connections -= 1
                    state.tell_rank_1()

        def _pause(self):
            self.pacer.wait()

        def _whole(self, path, words, prompt_tokens):
            for _word in words:
                self._pause()
            text = " ".join(words)
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(words),
                     "total_tokens": prompt_tokens + len(words)}
            ident = "chatcmpl-" + hashlib.sha256(text.encode()).hexdigest()[:12]
            if path == "/v1/completions":
                body = {"id": ident, "object": "text_completion", "created": int(time.time()), "model": state.args.name,
                        "choices": [{"index": 0, "text": text, "finish_reason": "stop"}], "usage": usage}
            elif path == "/v1/responses":
                body = {"id": ident, "object": "response", "model": state.args.name, "status": "completed",
                        "output": [{"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": text}]}]}
            elif path == "/v1/messages":
                body = {"id": ident, "type": "message", "role": "assistant", "model": state.args.name,
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
            else:
                body = {"id": ident, "object": "chat.completion", "created": int(time.time()), "model": state.args.name,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}], "usage": usage}
            self._close_stream()
            self._json(200, body)

        def _stream(self, body, words, prompt_tokens):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            ident = "chatcmpl-" + hashlib.sha256(" ".join(words).encode()).hexdigest()[:12]
            created = int(time.time())

            def event(choices, extra=None):
                chunk = {"id": ident, "object": "chat.completion.chunk", "created": created,
                         "model": state.args.name, "choices": choices}
                chunk.update(extra or {})
                self.wfile.write(("data: %s\n\n" % json.dumps(chunk, separators=(",", ":"))).encode())
                self.wfile.flush()

            event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
            for number, word in enumerate(words):
                self._pause()
                event([{"index": 0, "delta": {"content": (" " if number else "") + word}, "finish_reason": None}])
            event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
            if (body.get("stream_options") or {}).get("include_usage"):
                event([], {"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(words),
                                     "total_tokens": prompt_tokens + len(words)}})
            self._close_stream()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


# ---------------------------------------------------------------------------- main
def serve(args, config):
    if not os.path.isdir(args.model) and not MODEL_ID.match(args.model):
        raise LoadError("%s is neither a directory nor a Hugging Face repo id" % args.model)
    keys = api_keys(args)
    kernels = os.environ.get("TENSORFOLD_CUDA_KERNELS", "")
    if not kernels or not os.path.isfile(os.path.join(kernels, "aot.json")):
        raise LoadError("no CUDA kernel set for sm_120 at %s" % (kernels or "(TENSORFOLD_CUDA_KERNELS unset)"))
    if not os.path.isdir(args.model):
        raise LoadError("%s is not downloaded and HF_HUB_OFFLINE is set" % args.model)
    rank = args.rank
    device = args.device if args.device is not None else int(os.environ.get("TF_CUDA_DEVICE", "0"))
    started = time.time()
    link = None
    stopping = {"now": False}

    def on_term(signum, frame):
        log("tensorfold: stop signal: this rank exits, the other follows")
        stopping["now"] = True
        if link is not None:
            link.send("bye")
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    if args.tp == 2:
        link = Link(args, join_wait(config))
        link.connect()
        text = settings_text(args)
        if not link.exchange(text):
            log('rank %d loads with "%s"; the other rank\'s settings differ (see its log)' % (rank, text))
            return 1
        log("rank %d: settings agreed, NCCL joined" % rank)
    window, streams, per_stream, left, model, reserve = plan_memory(args, config, rank)
    state = State(args, config, keys, streams, window)
    state.link = link

    def other_left():
        if stopping["now"]:
            return
        reason = "rank %d closed the control link" % (1 - rank)
        log("rank %d: %s; exiting" % (rank, reason))
        with state.lock:
            open_streams = state.connections
            if rank == 1 and config["rank1_streams"] == "shared":
                open_streams = link.peer_streams
        # The contract: exit 3, or 0 when no stream was open.
        os._exit(0 if open_streams == 0 else 3)

    if link is not None:
        link.watch(other_left)
    if int(config["fail_rank"]) == rank:
        # Fault injection for tests: this rank dies (SIGKILL) fail_after_s after the ranks agreed.
        def die():
            time.sleep(float(config["fail_after_s"]))
            os.kill(os.getpid(), signal.SIGKILL)
        threading.Thread(target=die, daemon=True).start()
    time.sleep(float(config["load_s"]))
    log("CUDA sm_120 device %d (%s): model %.2f GiB; %d stream%s at once, %.2f GiB each at a %d-token window, "
        "of %.1f GiB left after a %.1f GiB reserve; prompts in 2048-row chunks"
        % (device, config["gpu_name"], model, streams, "" if streams == 1 else "s", per_stream, window, left, reserve))
    if rank != 0:
        while True:  # rank 1 follows rank 0's steps; it serves no HTTP
            time.sleep(3600)
    drafts = "off" if args.no_drafts else ("dflash2" if args.drafter else "mtp")
    try:
        server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    except OSError as err:
        raise LoadError("cannot listen on %s:%d: %s" % (args.host, args.port, err.strerror))
    server.daemon_threads = True
    if not keys and args.host not in ("127.0.0.1", "::1", "localhost"):
        log("warning: non-loopback server has no API key; requests are open")
    log("serving %s at http://%s:%d/v1 (sampling: temperature 0.6, top_p 0.95; drafts: %s; context: %d; "
        "thinking: %s, effort %s; loaded in %.1fs)"
        % (args.name, args.host, args.port, drafts, window, "on" if args.thinking else "off",
           args.reasoning_effort, time.time() - started))
    state.warm_until = time.monotonic() + float(config["warm_s"])
    server.serve_forever()
    return 0


def main(argv=None):
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser.parse_args(argv)
        if args.version:
            print(VERSION)
            return 0
        if args.command == "capabilities":
            caps = {"version": VERSION, "sm": ["sm_120"], "tp": [1, 2], "kv_dtype": ["fp8", "bf16"],
                    "packings": list(PACKINGS), "drafters": ["dflash2", "mtp"], "vision": True,
                    "max_parallel": 8, "api": ["/health", "/v1/models", "/v1/chat/completions", "/v1/completions",
                                               "/v1/responses", "/v1/messages", "/metrics"]}
            print(json.dumps(caps, indent=2 if not args.json else None))
            return 0
        if args.command != "serve" or not args.model:
            raise UsageError("expected: serve MODEL [flags]")
        check_flags(args)
    except UsageError as err:
        sys.stderr.write("tensorfold-native: %s\n%s\n" % (err, parser.format_usage().strip()))
        return 2
    log(VERSION)
    config = load_config()
    if config["argv_dir"] and args.model != "/nonexistent/argument-check":
        # What this rank was started with, for tests comparing it with the plan.
        with open(os.path.join(config["argv_dir"], "rank%d.argv.json" % args.rank), "w") as out:
            json.dump([sys.argv[0]] + list(argv), out)
    try:
        return serve(args, config)
    except LoadError as err:
        log("tensorfold: %s" % err)
        return 1
    except LinkError as err:
        log("rank %d: %s; exiting" % (args.rank, err))
        return 3


if __name__ == "__main__":
    sys.exit(main())
