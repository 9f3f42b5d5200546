#!/usr/bin/env python3
"""Check the running demo as its user would, from this machine, one PASS/FAIL line each.

Run after `bash scripts/demo.sh`: `python3 tests/demo/check.py` (the standard library only).
1. the gateway answers with the API key and refuses without it;
2. Prometheus (on the gateway box) has every target up: its own, both engines, both node
   exporters and the gateway (its HTTP API, query `up`);
3. the engine container of one box stopped (`docker stop` inside the box), GLM53EndpointDown fires
   for that box (its rule waits `for: 1m`; the wait is bounded), then the engine is started again
   and its target is up once more (the same container: the demo's next run replaces nothing).
Exit status 0 only when every check passed. Nothing here changes the demo but that stop and start.
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GATEWAY = "glm53-demo-gateway"
BOXES = ["glm53-demo-gpu1", "glm53-demo-gpu2"]
STOPPED = BOXES[-1]
CONTAINER = "glm53-zig"
KEY_FILE = os.path.join(ROOT, ".cache", "glm53-demo", "api-key")
TARGETS = 1 + 2 * len(BOXES) + 1  # Prometheus itself, engines, node exporters, the gateway
UP_WAIT_S = 90  # Prometheus scrapes every 15 s; a fresh start needs a round or two
ALERT_WAIT_S = 240  # the rule's for: 1m, plus scrape and evaluation rounds
FAILED = []


def check(name, ok, detail=""):
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
    if not ok:
        FAILED.append(name)
    return ok


def address(container):
    out = subprocess.run(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}",
                          container], capture_output=True, text=True, check=False)
    return (out.stdout.split() or [""])[0]


def get(url, key=None, timeout=10):
    headers = {"Authorization": "Bearer " + key} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""
    except OSError as err:
        return None, str(err)


def prometheus(base, path, **query):
    status, body = get(base + path + ("?" + urllib.parse.urlencode(query) if query else ""))
    return json.loads(body)["data"] if status == 200 else None


def up_series(base):
    data = prometheus(base, "/api/v1/query", query="up") or {"result": []}
    return dict(("%s %s" % (r["metric"].get("job"), r["metric"].get("box") or r["metric"].get("gateway")
                            or r["metric"].get("instance")), r["value"][1]) for r in data["result"])


def wait(predicate, timeout, step=3):
    deadline = time.time() + timeout
    while True:
        value = predicate()
        if value or time.time() >= deadline:
            return value
        time.sleep(step)


def engine(box, action):
    return subprocess.run(["docker", "exec", box, "docker", action, CONTAINER], capture_output=True, text=True,
                          check=False, timeout=120)


def main():
    ip = address(GATEWAY)
    if not ip:
        check("the demo's gateway box runs", False, "no container %s: run bash scripts/demo.sh first" % GATEWAY)
        return 1
    with open(KEY_FILE) as handle:
        key = handle.read().strip()
    gateway, prom = "http://%s:8020/v1" % ip, "http://%s:9090" % ip

    # 1. the gateway
    status, _body = get(gateway + "/models")
    check("the gateway refuses a request without the key", status == 401, "HTTP %s from %s/models" % (status, gateway))
    status, body = get(gateway + "/models", key=key)
    check("the gateway answers with the key", status == 200 and '"data"' in body, "HTTP %s" % status)

    # 2. every target up
    series = wait(lambda: (lambda s: s if len(s) == TARGETS and all(v == "1" for v in s.values()) else None)(
        up_series(prom)), UP_WAIT_S) or up_series(prom)
    check("Prometheus has every target up", len(series) == TARGETS and all(v == "1" for v in series.values()),
          "%d of %d targets: %s" % (len(series), TARGETS, ", ".join("%s=%s" % kv for kv in sorted(series.items()))))

    # 3. one engine stopped: its endpoint-down alert fires
    stopped = engine(STOPPED, "stop")
    check("the engine container of %s stopped" % STOPPED, stopped.returncode == 0, stopped.stderr.strip())
    began = time.time()

    def firing():
        alerts = (prometheus(prom, "/api/v1/alerts") or {}).get("alerts", [])
        return [a for a in alerts if a["labels"].get("alertname") == "GLM53EndpointDown"
                and a["labels"].get("box") == STOPPED and a["state"] == "firing"]
    fired = wait(firing, ALERT_WAIT_S, step=5)
    others = [a["labels"].get("box") for a in (prometheus(prom, "/api/v1/alerts") or {}).get("alerts", [])
              if a["labels"].get("alertname") == "GLM53EndpointDown" and a["labels"].get("box") != STOPPED]
    check("GLM53EndpointDown fires for %s" % STOPPED, bool(fired) and not others,
          "firing after %.0f s (bound %d s); other boxes alerting: %s" % (time.time() - began, ALERT_WAIT_S,
                                                                           others or "none"))
    started = engine(STOPPED, "start")
    back = wait(lambda: up_series(prom).get("glm53-engine %s" % STOPPED) == "1", UP_WAIT_S)
    check("%s's engine started again and is up in Prometheus" % STOPPED, started.returncode == 0 and bool(back),
          started.stderr.strip())
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
