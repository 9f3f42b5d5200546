#!/usr/bin/env python3
"""Benchmark of glm53.tensorfold.hf_snapshot (its transfer engine, the code the module runs)
against plain `hf download`, both pointed at the Hub emulator on loopback, same files, one run
each. Prints throughput and their ratio, the bytes fetched again after a SIGKILL, and the shard
bytes a re-run of a complete snapshot reads."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))
from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_transfer  # noqa: E402

HUB = os.path.join(ROOT, "tests", "standins", "hub")
REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold"
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
MIB = 1024 * 1024
SHARDS, SHARD_MIB = 4, 64


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def control(url, path, data=None):
    req = urllib.request.Request(url + path, data=json.dumps(data).encode() if data is not None else b"",
                                 method="POST" if data is not None or path.endswith("reset") else "GET")
    with urllib.request.urlopen(req) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def main():
    work = tempfile.mkdtemp(prefix="glm53-bench-weights-")
    port, cdn = free_port(), free_port()
    emulator = None
    try:
        subprocess.check_call([sys.executable, os.path.join(HUB, "make_repos.py"), work + "/repos", "--shards",
                               str(SHARDS), "--shard-mib", str(SHARD_MIB)])
        emulator = subprocess.Popen([sys.executable, os.path.join(HUB, "hub_emulator.py"), "--root", work + "/repos",
                                     "--bind", "127.0.0.1", "--port", str(port), "--cdn-port", str(cdn)],
                                    stdout=subprocess.DEVNULL)
        url = "http://127.0.0.1:%d" % port
        for dummy in range(100):
            try:
                control(url, "/_emulator/log")
                break
            except OSError:
                time.sleep(0.1)
        total = SHARDS * SHARD_MIB * MIB

        env = dict(os.environ, HF_ENDPOINT=url, HF_HOME=work + "/hf-home", HF_HUB_DISABLE_PROGRESS_BARS="1",
                   HF_HUB_DISABLE_TELEMETRY="1")
        began = time.time()
        subprocess.check_call(["hf", "download", REPO, "--revision", COMMIT, "--local-dir", work + "/hf"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hf_s = time.time() - began
        shutil.rmtree(work + "/hf")

        control(url, "/_emulator/reset")
        began = time.time()
        result = hf_transfer.Snapshot(REPO, COMMIT, work + "/ours", work + "/state", endpoint=url).run()
        ours_s = time.time() - began
        assert result["verified"]
        hf_rate, ours_rate = total / hf_s / MIB, total / ours_s / MIB
        print("download of %d MiB (%d shards), one run each, loopback emulator:" % (total // MIB, SHARDS))
        print("  hf download (no checksum check)     %6.1f s  %7.1f MiB/s" % (hf_s, hf_rate))
        print("  hf_snapshot (sha256 of every file)  %6.1f s  %7.1f MiB/s" % (ours_s, ours_rate))
        print("  throughput ratio hf_snapshot / hf download: %.2f (goal >= 0.95)" % (ours_rate / hf_rate))

        control(url, "/_emulator/reset")
        again = hf_transfer.Snapshot(REPO, COMMIT, work + "/ours", work + "/state", endpoint=url).run()
        print("re-run of the complete snapshot: %d shard bytes read, %d Hub requests" % (
            again["local_bytes_hashed"], len(control(url, "/_emulator/log"))))

        shutil.rmtree(work + "/ours")
        shutil.rmtree(work + "/state")
        control(url, "/_emulator/faults", {"throttle_bps": 40 * MIB})
        code = ("import sys; sys.path.insert(0, %r); from ansible_collections.glm53.tensorfold.plugins.module_utils "
                "import hf_transfer as t; t.Snapshot(%r, %r, %r, %r, endpoint=%r, progress_file=%r).run()"
                % (os.path.join(ROOT, ".cache", "collections"), REPO, COMMIT, work + "/ours", work + "/state", url,
                   work + "/progress.json"))
        child = subprocess.Popen([sys.executable, "-c", code])
        while True:
            try:
                with open(work + "/progress.json") as handle:
                    if json.load(handle)["done"] >= 1.6 * SHARD_MIB * MIB:
                        break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        partial = [n for n in os.listdir(work + "/state/partial") if n.endswith(".incomplete")][0]
        on_disk = os.path.getsize(work + "/state/partial/" + partial)
        control(url, "/_emulator/reset")
        resumed = hf_transfer.Snapshot(REPO, COMMIT, work + "/ours", work + "/state", endpoint=url).run()
        ranged = [e for e in control(url, "/_emulator/log") if e["status"] == 206]
        start = int(ranged[0]["range"][6:-1])
        print("SIGKILL mid-shard at %.1f MiB of the shard: resumed with Range from %.1f MiB; %.2f MiB on disk fetched "
              "again (bound: one 16 MiB chunk); verified=%s" % (on_disk / MIB, start / MIB, (on_disk - start) / MIB,
                                                                resumed["verified"]))
    finally:
        if emulator is not None:
            emulator.terminate()
            emulator.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
