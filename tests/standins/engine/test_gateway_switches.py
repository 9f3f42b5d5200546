"""The engine stand-in's two gateway test switches: the wedge file (/health and /v1/models answer,
generation requests never finish) and the request log (each generation request's start and end)."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_process import ENGINE, free_port, rank_folders  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture
def engine(tmp_path):
    kernels, model = rank_folders(tmp_path)
    port = free_port()
    env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(kernels), TENSORFOLD_STANDIN_LOAD_S="0",
               TENSORFOLD_STANDIN_TOKENS_PER_S="500", TENSORFOLD_STANDIN_WEDGE_FILE=str(tmp_path / "wedge"),
               TENSORFOLD_STANDIN_REQUEST_LOG=str(tmp_path / "requests.jsonl"))
    env.pop("TENSORFOLD_API_KEY", None)
    log = open(str(tmp_path / "engine.log"), "w")
    proc = subprocess.Popen([sys.executable, ENGINE, "serve", str(model), "--port", str(port), "--context", "65536"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    base = "http://127.0.0.1:%d" % port
    deadline = time.time() + 15
    while time.time() < deadline and "serving " not in (tmp_path / "engine.log").read_text():
        time.sleep(0.05)
    yield {"base": base, "tmp": tmp_path}
    proc.kill()
    proc.wait()


def chat(base, timeout, agent="test-client"):
    body = json.dumps({"model": "GLM-5.3-Flash", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]})
    request = urllib.request.Request(base + "/v1/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json", "User-Agent": agent})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return answer.status


def test_a_wedged_engine_answers_health_but_finishes_no_request(engine):
    assert chat(engine["base"], 5) == 200
    (engine["tmp"] / "wedge").write_text("")
    with urllib.request.urlopen(engine["base"] + "/health", timeout=5) as answer:
        assert json.loads(answer.read())["status"] == "ok"
    with urllib.request.urlopen(engine["base"] + "/v1/models", timeout=5) as answer:
        assert answer.status == 200
    with pytest.raises((socket.timeout, urllib.error.URLError, TimeoutError)):
        chat(engine["base"], 1.5)
    (engine["tmp"] / "wedge").unlink()
    assert chat(engine["base"], 5) == 200


def test_each_generation_request_is_logged_with_its_times_and_agent(engine):
    before = time.time()
    chat(engine["base"], 5, agent="glm53-gateway-check")
    chat(engine["base"], 5, agent="aiperf/0.13.0")

    def entries_now():
        return [json.loads(line) for line in (engine["tmp"] / "requests.jsonl").read_text().splitlines()]
    deadline = time.time() + 5  # the end line is written just after the reply's last byte
    while len(entries_now()) < 4 and time.time() < deadline:
        time.sleep(0.05)
    entries = entries_now()
    starts = [e for e in entries if e["event"] == "start"]
    ends = [e for e in entries if e["event"] == "end"]
    assert [e["agent"] for e in starts] == ["glm53-gateway-check", "aiperf/0.13.0"]
    assert [e["id"] for e in ends] == [e["id"] for e in starts]
    # The stand-in rounds its times to the millisecond: an entry written just now may read up to half
    # a millisecond ahead of the clock.
    assert all(before - 1 < e["t"] <= time.time() + 0.001 for e in entries)
    assert starts[0]["path"] == "/v1/chat/completions" and starts[0]["stream"] is False
