"""The engine stand-in's bench additions: a configured decode speed per stream and prefill
speed, streamed honestly at those speeds; a fixed reply length on request (``ignore_eos``);
requests beyond --parallel waiting for a stream; /metrics with requests, tokens and the queue,
behind the API key unless --metrics-open. One rank (--tp 1) on loopback."""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_process import ENGINE, free_port, rank_folders  # noqa: E402  pylint: disable=wrong-import-position
KEY = "metrics-canary-key"


@pytest.fixture
def engine(tmp_path):
    procs = []

    def start(rate, prefill, parallel="4", extra=()):
        kernels, model = rank_folders(tmp_path)
        key = tmp_path / "key"
        key.write_text(KEY + "\n")
        os.chmod(str(key), 0o600)
        port = free_port()
        env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(kernels), TENSORFOLD_KV_PAGES="1",
                   TENSORFOLD_STANDIN_LOAD_S="0", TENSORFOLD_STANDIN_TOKENS_PER_S=str(rate),
                   TENSORFOLD_STANDIN_PREFILL_TOKENS_PER_S=str(prefill))
        proc = subprocess.Popen([sys.executable, ENGINE, "serve", str(model), "--port", str(port),
                                 "--context", "65536", "--parallel", parallel, "--api-key-file", str(key)]
                                + list(extra), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        base = "http://127.0.0.1:%d" % port
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                return base
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the stand-in did not come up")

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def stream(base, prompt_words, max_tokens, ignore_eos=True):
    body = {"model": "GLM-5.3-Flash", "messages": [{"role": "user", "content": " ".join(["w"] * prompt_words)}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": ignore_eos}
    request = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    sent = time.monotonic()
    stamps = []
    with urllib.request.urlopen(request, timeout=60) as answer:
        for raw in answer:
            line = raw.decode().strip()
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                stamps.append(time.monotonic())
    return sent, stamps


def metrics(base, key=KEY):
    headers = {"Authorization": "Bearer " + key} if key else {}
    with urllib.request.urlopen(urllib.request.Request(base + "/metrics", headers=headers), timeout=5) as answer:
        return dict(line.split(" ") for line in answer.read().decode().splitlines() if not line.startswith("#"))


def test_streams_at_the_configured_decode_and_prefill_speed(engine):
    base = engine(rate=80, prefill=2000)
    sent, stamps = stream(base, 1000, 60)
    assert len(stamps) == 60  # ignore_eos: the reply is max_tokens long
    ttft = stamps[0] - sent
    # 1000 prompt tokens at 2000 a second; the upper bound leaves room for a loaded machine and still
    # fails a prefill counted twice (1 s)
    assert 0.45 <= ttft <= 0.8, ttft
    # The median gap, not first-to-last: on a busy machine one token can leave late and the
    # schedule then catches up, which moves the ends but not the pace of the stream.
    gaps = sorted(later - earlier for earlier, later in zip(stamps, stamps[1:]))
    rate = 1 / gaps[len(gaps) // 2]
    assert abs(rate - 80) <= 8, rate


def test_without_ignore_eos_the_reply_ends_early(engine):
    base = engine(rate=500, prefill=0)
    unused_sent, stamps = stream(base, 3, 60, ignore_eos=False)
    assert 5 < len(stamps) < 60


def test_metrics_count_requests_tokens_and_the_queue_behind_the_key(engine):
    base = engine(rate=40, prefill=0, parallel="1")
    with pytest.raises(urllib.error.HTTPError) as refused:
        metrics(base, key=None)
    assert refused.value.code == 401
    threads = [threading.Thread(target=stream, args=(base, 10, 40)) for unused in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.4)
    during = metrics(base)
    assert during["tensorfold_running_streams"] == "1" and during["tensorfold_queued_requests"] == "1"
    for thread in threads:
        thread.join()
    after = metrics(base)
    assert after["tensorfold_requests_total"] == "2"
    assert after["tensorfold_generated_tokens_total"] == "80"
    assert after["tensorfold_prompt_tokens_total"] == "20"
    assert after["tensorfold_queued_requests"] == "0" and after["tensorfold_max_streams"] == "1"


def test_metrics_open_needs_no_key(engine):
    base = engine(rate=100, prefill=0, extra=["--metrics-open"])
    assert metrics(base, key=None)["tensorfold_requests_total"] == "0"
