"""The monitoring role's Prometheus files, run by the real Prometheus (Debian's package, the
binary scripts/bootstrap.sh installs for promtool) on the controller against two engine
stand-ins on loopback that need an API key: both targets come up (the bearer credentials_file
works), then one engine is stopped and GLM53EndpointDown fires for it, and only for it. Every
wait is bounded. The package install and the service are what a real host adds; this test
covers the files and the rules in a live Prometheus.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINE = os.path.join(ROOT, "tests", "standins", "engine", "tensorfold_native.py")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
KEY = "monitoring-canary-key-5521"



@pytest.fixture(autouse=True)
def prometheus_installed():
    """A missing prometheus fails these tests (scripts/bootstrap.sh installs Debian's package)."""
    assert os.path.exists(PROMETHEUS), "prometheus is missing: apt-get install prometheus (scripts/bootstrap.sh)"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read().decode())


def wait_for(predicate, timeout, step=1.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return None


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("monitoring")
    (tmp / "kernels").mkdir()
    (tmp / "kernels" / "aot.json").write_text("{}")
    (tmp / "model").mkdir()
    key = tmp / "key"
    key.write_text(KEY + "\n")
    os.chmod(str(key), 0o600)
    engines, ports = {}, {}
    for box in ("box-a", "box-b"):
        ports[box] = free_port()
        env = dict(os.environ, TENSORFOLD_CUDA_KERNELS=str(tmp / "kernels"), TENSORFOLD_STANDIN_LOAD_S="0")
        engines[box] = subprocess.Popen(
            [sys.executable, ENGINE, "serve", str(tmp / "model"), "--port", str(ports[box]), "--context", "65536",
             "--api-key-file", str(key)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = tmp / "prometheus"
    (tmp / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: {python}
            tensorfold_api_key: {key}
            monitoring_prometheus_group: root
            monitoring_node_exporter: false
            monitoring_scrape_interval: 2s
            monitoring_evaluation_interval: 2s
            monitoring_bench_baselines_file: /nonexistent/bench-baselines.json
          children:
            gpu_hosts:
              hosts:
                box-a: {{ansible_host: 127.0.0.1, tensorfold_port: {a}}}
                box-b: {{ansible_host: 127.0.0.1, tensorfold_port: {b}}}
            monitoring:
              hosts:
                prometheus-local:
        """).format(python=sys.executable, key=KEY, a=ports["box-a"], b=ports["box-b"]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_NOCOLOR="1")
    render = [PLAYBOOK_BIN, "-i", str(tmp / "hosts.yml"), os.path.join(ROOT, "tests", "monitoring", "render.yml"),
              "-e", "monitoring_config_dir=%s" % config]
    rendered = subprocess.run(render, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert rendered.returncode == 0, rendered.stdout[-3000:]
    again = subprocess.run(render, env=env, capture_output=True, text=True, timeout=300, check=False)
    web = free_port()
    prometheus = subprocess.Popen(
        [PROMETHEUS, "--config.file=%s" % (config / "prometheus.yml"), "--storage.tsdb.path=%s" % (tmp / "data"),
         "--web.listen-address=127.0.0.1:%d" % web], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    yield {"tmp": tmp, "config": config, "api": "http://127.0.0.1:%d/api/v1" % web, "engines": engines,
           "rerun": again.stdout + again.stderr, "rendered": rendered.stdout}
    prometheus.send_signal(signal.SIGTERM)
    prometheus.wait(timeout=30)
    for proc in engines.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def engine_targets(api):
    try:
        targets = get_json(api + "/targets")["data"]["activeTargets"]
    except OSError:
        return {}
    return dict((t["labels"].get("box"), t["health"]) for t in targets if t["labels"].get("job") == "glm53-engine")


def firing(api, name):
    try:
        alerts = get_json(api + "/alerts")["data"]["alerts"]
    except OSError:
        return []
    return [a["labels"].get("box") for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def test_rendering_again_changes_nothing_and_shows_no_key(watched):
    assert "changed=0" in watched["rerun"], watched["rerun"][-2000:]
    assert KEY not in watched["rendered"] and KEY not in watched["rerun"]
    assert KEY not in (watched["config"] / "prometheus.yml").read_text()
    assert oct(os.stat(str(watched["config"] / "glm53-api-key")).st_mode & 0o777) == "0o640"


def all_up(api):
    targets = engine_targets(api)
    return targets if len(targets) == 2 and all(h == "up" for h in targets.values()) else None


def test_every_engine_target_is_up_with_the_key(watched):
    healths = wait_for(lambda: all_up(watched["api"]), timeout=60)
    assert healths == {"box-a": "up", "box-b": "up"}, engine_targets(watched["api"])


def test_a_stopped_box_fires_endpoint_down_and_only_it(watched):
    assert wait_for(lambda: engine_targets(watched["api"]).get("box-b") == "up", timeout=60)
    stopped = time.time()
    watched["engines"]["box-b"].send_signal(signal.SIGTERM)
    watched["engines"]["box-b"].wait(timeout=10)
    # The rule waits a minute (for: 1m) after the first failed scrape; bounded at three.
    boxes = wait_for(lambda: firing(watched["api"], "GLM53EndpointDown"), timeout=180, step=2)
    took = time.time() - stopped
    print("GLM53EndpointDown fired %.0f s after the engine stopped" % took)
    assert boxes == ["box-b"]
    assert 55 <= took <= 180
    assert engine_targets(watched["api"])["box-a"] == "up"
