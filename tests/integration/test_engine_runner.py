"""The runner script (engine_args.runner_script) driving the engine stand-in's two ranks on
loopback, and CONTEXT=auto's one retry against each refusal the engine contract allows: "fits no
stream" and "--parallel P needs", KV pages on and off, numeric and auto PARALLEL. No Docker: the
script's container paths (/logs, /model, /drafter, the engine's path) point into a temporary folder.

Each case asks for 1,048,576 tokens on a card that cannot hold it, reads both ranks' refusals with
context_fit.analyse (as the engine_container module does), starts once more at the answer and
checks that the engine serves it with the streams asked for. Also: the stop's drain check against
the stand-in serving with an API key (where /health shows only its status), and two small engines
whose ranks end in orders the stand-in cannot time, for the runner's naming of the failed rank.
"""

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(ROOT, "tests", "standins", "engine", "tensorfold_native.py")
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args  # noqa: E402
from ansible_collections.glm53.tensorfold.plugins.module_utils.context_fit import analyse, latest_run  # noqa: E402
from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_container import EngineContainer  # noqa: E402
from ansible_collections.glm53.tensorfold.plugins.module_utils.plan import plan_lines  # noqa: E402


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def settings(**changes):
    base = {"tensorfold_served_name": "GLM-5.3-Flash", "tensorfold_host": "127.0.0.1", "tensorfold_port": free_port(),
            "tensorfold_nccl_port": free_port(), "tensorfold_parallel": "4", "tensorfold_kv": "fp8",
            "tensorfold_max_tokens": 32768, "tensorfold_thinking": False, "tensorfold_reasoning_effort": "high",
            "tensorfold_drafter": "dflash2", "tensorfold_vision": True, "tensorfold_memory_reserve_gib": 4,
            "tensorfold_kv_pages": True, "tensorfold_dense": "q8", "tensorfold_head": "bf16",
            "tensorfold_absorb_mma": False, "tensorfold_w8a8": False}
    base.update(changes)
    return base


# Where the runner starts waiting for its ranks, and a delay there that lasts until both have ended
# (at most 30 s); `sleep` runs in the foreground, so bash notes the ranks' ends before the wait.
WAIT_STARTS = "\nended_pid=\n"
BOTH_RANKS_ENDED = ('for _ in $(seq 1 300); do { kill -0 "$RANK0_PID" || kill -0 "$RANK1_PID"; } 2>/dev/null || break; '
                    'sleep 0.1; done')


class Box(object):
    """A folder standing in for the container: /logs, /model, /drafter and the engine binary."""

    def __init__(self, tmp_path, free_gib, extra_env=None):
        self.tmp = tmp_path
        for name in ("model", "drafter", "kernels"):
            (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / "model" / "config.json").write_text("{}")
        (tmp_path / "kernels" / "aot.json").write_text("{}")
        engine = tmp_path / "tensorfold-native"
        engine.write_text(open(STANDIN).read().replace("#!/usr/bin/env python3", "#!" + sys.executable, 1))
        engine.chmod(0o755)
        self.engine = str(engine)
        self.env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(tmp_path / "kernels"),
                        TENSORFOLD_STANDIN_GPU_FREE_GIB=str(free_gib), TENSORFOLD_STANDIN_LOAD_S="0.1",
                        TENSORFOLD_STANDIN_JOIN_WAIT_S="20")
        self.env.update(extra_env or {})
        self.runs = 0

    def script(self, text, logs):
        for mount, here in ((engine_args.LOG_MOUNT, logs), (engine_args.DRAFTER_MOUNT, str(self.tmp / "drafter")),
                            (engine_args.MODEL_MOUNT, str(self.tmp / "model"))):
            text = text.replace("=" + mount + "\n", "=" + here + "\n").replace(" " + mount + " ", " " + here + " ")
            text = text.replace("  " + mount + "\n", "  " + here + "\n")
        return text.replace(shlex.quote(engine_args.ENGINE), shlex.quote(self.engine))

    def start(self, s, window, timeout=30, late_wait=False, earlier=None):
        """Run the runner at ``window``: (exit status or None while serving, rank logs, process).

        ``late_wait``: the runner reaches its wait for the ranks only after both have ended, as a
        runner kept off the CPU would (bash has by then filed both away as finished jobs).
        ``earlier``: the rank logs' text before this start, as an earlier start left them."""
        self.runs += 1
        logs = self.tmp / ("run%d" % self.runs)
        logs.mkdir()
        for rank, text in enumerate(earlier or ()):
            (logs / ("rank%d.log" % rank)).write_text(text)
        runner = logs / "runner.sh"
        text = self.script(engine_args.runner_script(s, window, "0,1"), str(logs))
        if late_wait:
            assert text.count(WAIT_STARTS) == 1, "the runner's wait for the ranks moved"
            text = text.replace(WAIT_STARTS, "\n" + BOTH_RANKS_ENDED + WAIT_STARTS)
        runner.write_text(text)
        env = dict(self.env, TENSORFOLD_STANDIN_ARGV_DIR=str(logs))
        proc = subprocess.Popen(["bash", str(runner)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            log0 = (logs / "rank0.log").read_text() if (logs / "rank0.log").exists() else ""
            if "serving " in log0 or proc.poll() is not None:
                break
            time.sleep(0.1)
        if proc.poll() is None:
            return None, self.logs(logs), proc, logs
        return proc.wait(10), self.logs(logs), proc, logs

    @staticmethod
    def logs(folder):
        return [(folder / ("rank%d.log" % r)).read_text() if (folder / ("rank%d.log" % r)).exists() else ""
                for r in (0, 1)]


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    return proc.wait(30)


# free GiB per card: rank 0 holds 84.50 GiB (weights, vision, DFlash2) and keeps a 4 GiB reserve,
# rank 1 82.70 GiB; a stream takes 8.00 GiB at 1,048,576 tokens (fp8).
CASES = [
    # (free GiB, parallel, kv_pages, refusal kind)
    (93.8, "4", True, "no_stream"),
    (93.8, "4", False, "no_stream"),
    (93.8, "auto", True, "no_stream"),
    (93.8, "auto", False, "no_stream"),
    (97.8, "4", True, "parallel"),
    (97.8, "4", False, "parallel"),
    (97.8, "2", True, "parallel"),
]


@pytest.mark.parametrize("free_gib,parallel,kv_pages,kind", CASES)
def test_auto_context_converges_with_one_retry(tmp_path, free_gib, parallel, kv_pages, kind):
    box = Box(tmp_path, free_gib)
    s = settings(tensorfold_parallel=parallel, tensorfold_kv_pages=kv_pages)
    status, logs, proc, unused = box.start(s, 1048576)
    assert status == 1, logs  # the container ends with the refusing rank's status
    found = analyse("\n".join(logs), 1048576, parallel, kv_pages=kv_pages)
    assert found["refused"] and found["kind"] == kind, logs
    answer = found["context"]
    assert answer is not None and answer % 512 == 0 and answer < 1048576
    status, logs, proc, unused = box.start(s, answer)
    try:
        assert status is None, logs
        streams = int(logs[0].split(" streams at once" if " streams at once" in logs[0] else " stream at once")[0]
                      .rsplit(" ", 1)[-1])
        if parallel != "auto":
            assert streams == int(parallel)
        assert "%d-token window" % int(answer) in logs[0]
    finally:
        assert stop(proc) == 143  # a stopped container is not a success: on-failure restarts it after a reboot


def test_the_runner_puts_its_start_line_on_a_line_of_its_own(tmp_path):
    # An earlier start refused with other figures, and rank 0 was killed mid-line: this start's
    # line still begins a line, so a reader takes this start's refusal, not the earlier one's.
    box = Box(tmp_path, 93.8)
    s = settings()
    status, first, unused, unused = box.start(s, 1048576)
    earlier = [re.sub(r"[0-9.]+ GiB is left", "2.00 GiB is left", first[0]) + "rank 0: hashing shard 7/40", first[1]]
    assert earlier[0] != first[0] + "rank 0: hashing shard 7/40" and earlier[1].endswith("\n")
    status, logs, unused, unused = box.start(s, 1048576, earlier=earlier)
    assert status == 1, logs
    assert "rank 0: hashing shard 7/40\nrunner: " in logs[0]
    assert logs[1].startswith(earlier[1] + "runner: ")  # no blank line after a finished one
    for log in logs:
        assert latest_run(log).startswith("runner: ") and latest_run(log).count("starting rank 1 and rank 0") == 1
    assert analyse(latest_run(logs[0]), 1048576, "4")["context"] == analyse(first[0], 1048576, "4")["context"]


def test_both_ranks_refusing_take_the_smaller_answer(tmp_path):
    box = Box(tmp_path, 93.8)
    s = settings()
    status, logs, proc, unused = box.start(s, 1048576)
    assert "fits no stream" in logs[0] and "fits no stream" in logs[1]
    both = analyse("\n".join(logs), 1048576, "4")["context"]
    assert both == min(analyse(logs[0], 1048576, "4")["context"], analyse(logs[1], 1048576, "4")["context"])
    assert both == analyse(logs[0], 1048576, "4")["context"]  # rank 0 carries the vision tower and drafter


def test_paged_admit_switch_starts_fewer_streams(tmp_path):
    # The stand-in's other reading of pages: no refusal, fewer streams (the role warns W_STREAMS).
    box = Box(tmp_path, 97.8, {"TENSORFOLD_STANDIN_PAGED_PARALLEL": "admit"})
    status, logs, proc, unused = box.start(settings(), 1048576)
    try:
        assert status is None, logs
        assert "1 stream at once" in logs[0]
    finally:
        stop(proc)


@pytest.mark.parametrize("late_wait", [False, True], ids=["runner-waiting", "runner-late"])
@pytest.mark.parametrize("dying", [1, 0])
def test_a_dying_rank_ends_the_runner_with_a_failure_status(tmp_path, dying, late_wait):
    box = Box(tmp_path, 93.8, {"TENSORFOLD_STANDIN_FAIL_RANK": str(dying), "TENSORFOLD_STANDIN_FAIL_AFTER_S": "0.5"})
    status, logs, proc, folder = box.start(settings(), 65536, late_wait=late_wait)
    status = proc.wait(30) if status is None else status
    assert status == 137  # the dying rank's SIGKILL, not the other's 0 for a control link closed with no stream open
    logs = box.logs(folder)
    assert "rank %d: rank %d closed the control link; exiting" % (1 - dying, dying) in logs[1 - dying]
    assert "runner: rank %d exited with status 137" % dying in logs[dying]
    assert "runner: rank %d exited" % (1 - dying) not in logs[0] + logs[1]


@pytest.mark.parametrize("late_wait", [False, True], ids=["runner-waiting", "runner-late"])
@pytest.mark.parametrize("reading,follower", [("none", 0), ("shared", 3)])
def test_rank_0_dying_mid_stream_is_named_whichever_status_rank_1_exits_with(tmp_path, late_wait, reading, follower):
    # Rank 1 exits 3 or 0 for the closed link when a stream was open (the stand-in's rank1_streams):
    # the container ends with rank 0's 137 either way, and the runner names rank 0.
    box = Box(tmp_path, 93.8, {"TENSORFOLD_STANDIN_FAIL_RANK": "0", "TENSORFOLD_STANDIN_FAIL_AFTER_S": "2",
                               "TENSORFOLD_STANDIN_TOKENS_PER_S": "2", "TENSORFOLD_STANDIN_RANK1_STREAMS": reading})
    s = settings()
    status, logs, proc, folder = box.start(s, 65536, late_wait=late_wait)
    assert status is None, logs
    request = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % s["tensorfold_port"], method="POST",
                                     data=b'{"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}',
                                     headers={"Content-Type": "application/json"})
    client = threading.Thread(target=lambda: pytest.raises(Exception, urllib.request.urlopen, request, timeout=30),
                              daemon=True)
    client.start()
    assert proc.wait(30) == 137
    logs = box.logs(folder)
    assert "rank 1: rank 0 closed the control link; exiting" in logs[1]
    assert "runner: rank 0 exited with status 137" in logs[0], logs
    if late_wait:  # both have ended when the runner looks: it says with which status rank 1 went
        assert "rank 1 has ended too (status %d)" % follower in logs[0], logs
    assert "runner: rank 1 exited" not in logs[0] + logs[1]


# Engines whose ranks end in orders the stand-in cannot time. "late end": the failing rank's end
# reaches the runner after the other rank's exit for the closed control link (a dying process's
# socket closes before its end is reported; on a busy host the gap shows). "hung other": rank 1
# exits 3 for a closed link while rank 0 hangs until a stop signal, then exits 0.
ENDING_ORDERS = {
    "late-end": ("""#!/bin/bash
case " $* " in
  *" --rank 1 "*) sleep 0.5; echo "rank 1: rank 0 closed the control link; exiting"; exit 0 ;;
  *) sleep 1.0; kill -KILL $$ ;;
esac
""", 137, 0, "runner: rank 0 exited with status 137; rank 1 has ended too (status 0)", (1, 4)),
    # The wait for a late end and the stop signal's delay are one 5 s, not two.
    "hung-other": ("""#!/bin/bash
case " $* " in
  *" --rank 1 "*) sleep 0.3; exit 3 ;;
  *) trap 'exit 0' TERM; while :; do sleep 0.1; done ;;
esac
""", 3, 1, "runner: rank 1 exited with status 3; stopping the other rank", (5, 8)),
}


@pytest.mark.parametrize("order", sorted(ENDING_ORDERS))
def test_the_runner_names_the_rank_that_ended_first(tmp_path, order):
    engine, expected, rank, line, (least, most) = ENDING_ORDERS[order]
    box = Box(tmp_path, 93.8)
    (tmp_path / "tensorfold-native").write_text(engine)
    started = time.time()
    status, unused, proc, folder = box.start(settings(), 65536)
    status = proc.wait(30) if status is None else status
    took = time.time() - started
    logs = box.logs(folder)
    assert status == expected
    assert line in logs[rank], logs
    assert "runner: rank" not in logs[1 - rank], logs
    assert least <= took < most, took


def test_ranks_receive_the_argv_the_plan_prints(tmp_path):
    box = Box(tmp_path, 93.8)
    s = settings(tensorfold_context=65536)
    status, logs, proc, folder = box.start(s, 65536)
    try:
        assert status is None, logs
        plan = dict((line.split(" ")[1], line.split("): ", 1)[1]) for line in plan_lines(s, {}) if line.startswith("rank "))
        for rank in ("0", "1"):
            received = json.loads((folder / ("rank%s.argv.json" % rank)).read_text())
            printed = box.script(plan[rank] + " ", str(folder)).rstrip(" ")
            assert shlex.join(received) == printed
    finally:
        stop(proc)


def test_drain_with_an_api_key_waits_for_the_open_request(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "aot.json").write_text("{}")
    key = tmp_path / "key"
    key.write_text("canary-drain\n")
    key.chmod(0o600)
    port = free_port()
    env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(tmp_path / "kernels"), TENSORFOLD_STANDIN_LOAD_S="0",
               TENSORFOLD_STANDIN_TOKENS_PER_S="4", TENSORFOLD_STANDIN_GPU_FREE_GIB="93.8")
    engine = subprocess.Popen([sys.executable, STANDIN, "serve", str(tmp_path / "model"), "--context", "65536",
                               "--host", "127.0.0.1", "--port", str(port), "--api-key-file", str(key)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                health = urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        assert health == b'{"status":"ok"}'  # keys configured: no live counts

        def slow_request():
            request = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, method="POST",
                                             data=b'{"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}',
                                             headers={"Authorization": "Bearer canary-drain",
                                                      "Content-Type": "application/json"})
            urllib.request.urlopen(request, timeout=30).read()

        client = threading.Thread(target=slow_request)
        client.start()
        time.sleep(0.5)
        box = EngineContainer({"host": "h1", "data_dir": str(tmp_path), "api_host": "127.0.0.1", "port": port,
                               "stop_grace": 20}, docker=None)
        started = time.time()
        box.drain()
        waited = time.time() - started
        client.join(10)
        assert box.messages and box.messages[0].startswith("1 connection(s) still open on h1 (open connections to port")
        assert 0.5 < waited < 10  # the request's ~2.5 s, not the 20 s grace
    finally:
        engine.kill()
        engine.wait()
