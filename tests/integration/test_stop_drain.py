"""The stop's drain check against the engine stand-in serving with an API key, where /health
shows only its status: engine_container counts the API port's open connections instead, warns
about them and waits for them (not the whole grace)."""

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STANDIN = os.path.join(ROOT, "tests", "standins", "engine", "tensorfold_native.py")
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_container import EngineContainer  # noqa: E402


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
        assert box.messages and box.messages[0].startswith("1 request(s) still open on h1 (open connections to port")
        assert 0.5 < waited < 10  # the request's ~2.5 s, not the 20 s grace
    finally:
        engine.kill()
        engine.wait()
