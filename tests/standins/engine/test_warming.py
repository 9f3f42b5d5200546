"""The engine stand-in's warm-up switch (``warm_s``: /health says ``"warming": true`` that long after
it serves; the contract has the field, not a duration), and what the start's wait and the smoke
test make of it, asked over HTTP as on a box."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_process import ENGINE, free_port, rank_folders  # noqa: E402  pylint: disable=wrong-import-position

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".cache", "collections"))
from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_container, smoke  # noqa: E402  pylint: disable=wrong-import-position

# Longer than any test here: the engine says it warms up for the whole test.
ALWAYS = "3600"


def serve(tmp_path, warm_s, key=False):
    kernels, model = rank_folders(tmp_path)
    port = free_port()
    env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(kernels), TENSORFOLD_STANDIN_LOAD_S="0",
               TENSORFOLD_STANDIN_WARM_S=warm_s)
    env.pop("TENSORFOLD_API_KEY", None)
    args = [sys.executable, ENGINE, "serve", str(model), "--port", str(port), "--context", "65536"]
    if key:
        (tmp_path / "key").write_text("warm-canary-123\n")
        os.chmod(str(tmp_path / "key"), 0o600)
        args += ["--api-key-file", str(tmp_path / "key")]
    log = open(str(tmp_path / "engine.log"), "w")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 15
    while time.time() < deadline and "serving " not in (tmp_path / "engine.log").read_text():
        time.sleep(0.05)
    return proc, port


@pytest.fixture
def engine(tmp_path, request):
    proc, port = serve(tmp_path, *request.param)
    yield port
    proc.kill()
    proc.wait()


def health(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/health" % port, timeout=5) as answer:
        return json.loads(answer.read())


def wait(tmp_path, port, api_key=None):
    """The start's wait against the engine, its container running, on a clock that its sleeps move."""
    clock = {"t": 0.0}
    running = json.dumps([{"State": {"Running": True}}])
    box = engine_container.EngineContainer(
        {"host": "h1", "data_dir": str(tmp_path), "name": "glm53-zig", "wait_timeout": 2, "api_host": "127.0.0.1",
         "port": port, "api_key": api_key, "settings": {}}, engine_container.Docker(lambda argv: (0, running, "")),
        sleep=lambda s: clock.update(t=clock["t"] + s), clock=lambda: clock["t"])
    return box.wait()


@pytest.mark.parametrize("engine", [(ALWAYS,)], indirect=True)
def test_warming_engine_keeps_the_start_waiting_and_the_smoke_test_asking(engine, tmp_path):
    assert health(engine)["warming"] is True and health(engine)["status"] == "ok"
    assert wait(tmp_path, engine) == "warming"
    asked = []
    fetch = smoke.box_fetch(5)
    answers = smoke.send_requests(lambda method, url, *a, **k: asked.append(url[-7:]) or fetch(method, url, *a, **k),
                                  "http://127.0.0.1:%d" % engine, "GLM-5.3-Flash", "hi", health_tries=3,
                                  health_delay=0, sleep=lambda s: None)
    assert asked[:4] == ["/health"] * 3 + ["/models"] and "chat" in answers


@pytest.mark.parametrize("engine", [("0",)], indirect=True)
def test_an_engine_done_warming_ends_the_wait_at_once(engine, tmp_path):
    assert health(engine)["warming"] is False
    assert wait(tmp_path, engine) == "up"


@pytest.mark.parametrize("engine", [(ALWAYS, True)], indirect=True)
def test_with_api_keys_health_has_no_warming_field_and_a_keyed_request_decides(engine, tmp_path):
    # /health cannot say: the start asks one token with the key, which the engine answers.
    assert health(engine) == {"status": "ok"}
    assert wait(tmp_path, engine, api_key="warm-canary-123") == "up"
    assert wait(tmp_path, engine, api_key="wrong-key") == "up"  # any answer but 429/503 (401 here): it serves
