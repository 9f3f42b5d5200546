#!/usr/bin/env python3
"""What the gateway scenario checks, one PASS/FAIL line each, with the figures.

Arguments: the Molecule inventory, the checkout, the scenario's ephemeral folder.

1. The gateway answers with the API key and refuses without it (the engines check the key the
   clients send through it); a streamed reply comes through as SSE; /metrics serves Prometheus text.
2. A box added to the inventory joins with one reload, and a reply streaming meanwhile finishes.
3. A bounded streaming load through the gateway with aiperf (at most a fixed number of requests at
   a fixed concurrency, stopped with Ctrl-C's signal a few seconds after the restart ends) while
   ``site.yml --tags restart`` rolls over all three boxes: no failed request,
   every box restarted, and no box got a new request while it was drained (the engine stand-in's
   request log against the gateway's states, read every 0.1 s from its stats).
4. A box wedged under load (/health fine, completions never finish) is out of rotation within two
   check intervals; a load sent after that has no failed request and none reaches the wedged box;
   the fleet report (site.yml --tags gateway) names it; heal.yml restarts it, and only it, and its
   report has each box up at the gateway (the restarted one too), at the URL site.yml's report
   shows, as has heal.yml --check's.
5. A deploy that changes a setting of two boxes (site.yml --tags start,smoke,gateway, as converge
   runs it) under a bounded streaming load: no failed request, the two changed boxes replaced one at
   a time, each drained at the gateway first (their drained windows do not overlap, no new request
   inside them), the unchanged box neither drained nor restarted.
6. The API key canary is nowhere but its files: Ansible's output, the command lines of every
   process on every box, the gateway and the controller, docker inspect, HAProxy's configuration
   and logs, aiperf's artifacts.
"""

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

INVENTORY, ROOT, EPHEMERAL = sys.argv[1:4]
SCENARIO = os.path.dirname(os.path.abspath(__file__))
BOXES = ["gateway-gpu-a", "gateway-gpu-b", "gateway-gpu-c"]
GATEWAY = "gateway-lb"
CONTAINER = "glm53-zig"
REQUEST_LOG = "/srv/glm53/.cache/requests.jsonl"
WEDGE = "/srv/glm53/logs/current/standin-wedge"
CHECK_INTERVAL = 5.0  # gateway_check_interval (the role's default)
RESTART_REQUESTS = 5000  # a bound: the load is stopped once the restart is over (about 15 requests/s here)
AFTER_RESTART_S = 3.0  # the load goes on this long after the restart, then gets SIGINT (aiperf saves its results)
LOAD_VENV = os.environ.get("GLM53_LOAD_TOOL_VENV") or os.path.join(ROOT, ".cache", "load-tool-venv")
REPORTS = os.path.join(EPHEMERAL, "reports")


def setting(name):
    with open(os.path.join(SCENARIO, "group_vars", "all.yml")) as handle:
        match = re.search(r"(?m)^%s:\s*(\S+)" % name, handle.read())
    return match.group(1)


KEY = setting("tensorfold_api_key")
FAILED = []
STARTED = time.time()


def check(name, ok, detail=""):
    """One line per check; the seconds since verify began show where its time goes."""
    print("%s [%.0f s] %s%s" % ("PASS" if ok else "FAIL", time.time() - STARTED, name, (": " + detail) if detail else ""),
          flush=True)
    if not ok:
        FAILED.append(name)
    return ok


def sh(argv, timeout=600, env=None):
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)


def in_box(box, command, timeout=60):
    return sh(["docker", "exec", box, "bash", "-c", command], timeout=timeout)


def playbook(name, *extra, timeout=600):
    argv = ["ansible-playbook", "-i", INVENTORY, "-e", "fleet_report_dir=%s" % REPORTS]
    argv += list(extra) + [os.path.join(ROOT, "playbooks", name)]
    return sh(argv, timeout=timeout)


def read_report():
    """The last run's fleet report: (its Markdown, its JSON), empty when there is none."""
    try:
        with open(os.path.join(REPORTS, "fleet-report.md")) as handle:
            markdown = handle.read()
        with open(os.path.join(REPORTS, "fleet-report.json")) as handle:
            return markdown, json.load(handle)
    except (OSError, ValueError):
        return "", {}


def gateway_states(report):
    """{box: its state at the gateway} from a fleet report's JSON (None: the report has none)."""
    return dict((line["host"], (line.get("gateway") or {}).get("state")) for line in report.get("hosts", []))


def gateway_address():
    out = sh(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", GATEWAY])
    return out.stdout.split()[0]


ADDRESS = gateway_address()
BASE = "http://%s:8020" % ADDRESS
STATS = "http://%s:8404" % ADDRESS


def http(url, body=None, key=None, timeout=15):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if key:
        headers["Authorization"] = "Bearer " + key
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def servers():
    """{server: (status, in flight)} of the gateway's backend, from its stats page."""
    _status, text = http(STATS + "/stats;csv;norefresh")
    rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
    return dict((r["svname"], (r["status"], int(r["scur"] or 0))) for r in rows
                if r["pxname"] == "engines" and r["svname"] not in ("FRONTEND", "BACKEND"))


def wait_for(predicate, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return None


def started_at(box):
    return in_box(box, "docker inspect -f '{{.State.StartedAt}}' %s" % CONTAINER).stdout.strip()


def request_log(box):
    out = in_box(box, "cat %s 2>/dev/null || true" % REQUEST_LOG).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def client_starts(box, after=0.0):
    """Times of the load tool's requests a box received: the gateway's own checks, the keyed
    start's one-token request and the smoke test's requests (both sent straight to a restarted
    box before it is put back) left out."""
    return [e["t"] for e in request_log(box) if e["event"] == "start" and e["t"] > after
            and not e.get("agent", "").startswith(("glm53-gateway-check", "glm53-start-check", "glm53-smoke-test"))]


def command_lines():
    """Every process's command line on the controller, read from /proc here: a `ps` ten times a
    second would cost this 2-core machine more than the checks it watches."""
    lines = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    lines.append(handle.read().replace(b"\0", b" ").decode("utf-8", "replace"))
            except OSError:  # ended meanwhile, or not ours to read
                pass
    return lines


class Watcher(threading.Thread):
    """Reads the gateway's server states every 0.1 s and keeps each change with its time."""

    def __init__(self):
        super().__init__(daemon=True)
        self.changes = []  # (time, server, status)
        self.readings = []  # every reading: (time, server, status)
        self.stop = False
        self.commands = []  # controller command lines that showed the key

    def run(self):
        last = {}
        while not self.stop:
            now = time.time()
            try:
                states = servers()
            except (OSError, ValueError):
                states = {}
            for name, (status, _scur) in states.items():
                self.readings.append((now, name, status))
                if last.get(name) != status:
                    self.changes.append((now, name, status))
                    last[name] = status
            # The canary: only command lines that show the key are kept (none should).
            self.commands.extend(line for line in command_lines() if KEY in line)
            time.sleep(0.1)

    def drained_windows(self, name):
        """[(from, to)]: from the first reading not UP to the last reading not UP before it is UP
        again ("UP 1/2", HAProxy's status just after maintenance, already gets requests). Only
        what was seen counts: the readings are some tenths of a second apart under load."""
        windows, since, last_down = [], None, None
        for when, server, status in self.readings:
            if server != name:
                continue
            if not status.startswith("UP"):
                if since is None:
                    since = when
                last_down = when
            elif since is not None:
                windows.append((since, last_down))
                since = None
        if since is not None:
            windows.append((since, last_down))
        return windows


class Streams(object):
    """Streamed chat requests sent back to back through the gateway by a few clients, until told to
    finish; each must end with data: [DONE]."""

    def __init__(self, clients):
        self.clients = clients
        self.ok = 0
        self.failed = []
        self.done = False
        self.threads = []

    def client(self):
        while not self.done:
            try:
                status, body = http(BASE + "/v1/chat/completions", key=KEY, timeout=30, body={
                    "model": "GLM-5.3-Flash", "stream": True, "max_tokens": 20,
                    "messages": [{"role": "user", "content": "stream through a reload"}]})
            except OSError as err:
                status, body = 0, str(err)
            if status == 200 and body.rstrip().endswith("data: [DONE]"):
                self.ok += 1
            else:
                self.failed.append("HTTP %s %s" % (status, body[:80]))

    def start(self):
        self.threads = [threading.Thread(target=self.client, daemon=True) for client in range(self.clients)]
        for thread in self.threads:
            thread.start()

    def finish(self):
        self.done = True
        for thread in self.threads:
            thread.join(40)


def tokenizer():
    """A tiny word-level tokenizer made here (nothing can fetch one), for aiperf's token counts."""
    folder = os.path.join(EPHEMERAL, "tokenizer")
    if os.path.exists(os.path.join(folder, "tokenizer.json")):
        return folder
    os.makedirs(folder, exist_ok=True)
    code = (
        "import json,sys\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers\n"
        "words = ['[UNK]'] + 'the a of to and in is it you that he was for on are with as his they be at one "
        "have this from'.split() + [chr(c) for c in range(97, 123)]\n"
        "vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}\n"
        "t = Tokenizer(models.WordLevel(vocab=vocab, unk_token='[UNK]'))\n"
        "t.pre_tokenizer = pre_tokenizers.Whitespace()\n"
        "t.save(sys.argv[1] + '/tokenizer.json')\n"
        "json.dump({'tokenizer_class': 'PreTrainedTokenizerFast', 'unk_token': '[UNK]', "
        "'model_max_length': 1000000}, open(sys.argv[1] + '/tokenizer_config.json', 'w'))\n")
    sh([os.path.join(LOAD_VENV, "bin", "python"), "-c", code, folder])
    return folder


def aiperf(name, requests, concurrency, osl=12, timeout_s=30.0):
    """Start aiperf: `requests` streamed chat requests, `concurrency` at a time, through the gateway.
    The key travels in the environment into aiperf's config file, never on a command line."""
    folder = os.path.join(EPHEMERAL, "aiperf-" + name)
    config = os.path.join(EPHEMERAL, "aiperf-%s.yaml" % name)
    with open(config, "w") as handle:
        handle.write("""schemaVersion: "2.0"
benchmark:
  model: GLM-5.3-Flash
  endpoint:
    url: ${GLM53_GATEWAY_URL}
    type: chat
    streaming: true
    api_key: ${GLM53_GATEWAY_KEY}
    timeout: %.1f
  tokenizer:
    name: %s
  artifacts:
    dir: %s
  dataset:
    type: synthetic
    entries: 100
    prompts:
      isl: 24
      osl: %d
  phases:
    type: concurrency
    concurrency: %d
    requests: %d
""" % (timeout_s, tokenizer(), folder, osl, concurrency, requests))
    # AIPERF_DATASET_MMAP_BASE_PATH: aiperf's mmap folders here, not left behind in /tmp.
    env = dict(os.environ, GLM53_GATEWAY_URL=BASE, GLM53_GATEWAY_KEY=KEY, AIPERF_DATASET_MMAP_BASE_PATH=EPHEMERAL)
    log = open(os.path.join(EPHEMERAL, "aiperf-%s.log" % name), "w")
    proc = subprocess.Popen([os.path.join(LOAD_VENV, "bin", "aiperf"), "profile", "--config", config,
                             "--ui-type", "none"], stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, folder


def aiperf_result(proc, folder, timeout=600):
    proc.wait(timeout=timeout)
    try:
        with open(os.path.join(folder, "profile_export_aiperf.json")) as handle:
            summary = json.load(handle)
    except (OSError, ValueError):
        return {"rc": proc.returncode, "requests": 0, "errors": -1}

    def figure(name):
        return int((summary.get(name) or {}).get("avg") or 0)
    good = figure("request_count")
    errors = figure("error_request_count")
    count = max(figure("completed_request_count"), good + errors)
    errors = max(errors, count - good)
    return {"rc": proc.returncode, "requests": count, "errors": errors,
            "error_summary": summary.get("error_summary") or []}


def main():
    # 1. the endpoint
    status = http(BASE + "/v1/models")[0]
    check("gateway refuses a request without the key (the engine's 401 passed through)", status == 401,
          "HTTP %s" % status)
    status, body = http(BASE + "/v1/models", key=KEY)
    check("gateway answers with the key", status == 200 and "GLM-5.3-Flash" in body, "HTTP %s" % status)
    status, body = http(BASE + "/v1/chat/completions", key=KEY, body={
        "model": "GLM-5.3-Flash", "stream": True, "max_tokens": 4,
        "messages": [{"role": "user", "content": "hello"}]})
    check("a streamed reply passes through as SSE", status == 200 and "chat.completion.chunk" in body
          and body.rstrip().endswith("data: [DONE]"), "HTTP %s, %d bytes" % (status, len(body)))
    status, body = http(STATS + "/metrics")
    check("HAProxy's Prometheus exporter on the stats port", status == 200 and "haproxy_server_status" in body,
          "HTTP %s" % status)
    states = servers()
    check("all three boxes up at the gateway", sorted(states) == sorted(BOXES)
          and all(s[0] == "UP" for s in states.values()), str(states))

    # 2. a box added to the inventory joins with one reload; a reply streaming meanwhile finishes
    two = os.path.join(EPHEMERAL, "two-boxes.yml")
    with open(two, "w") as handle:
        handle.write("gateway_two:\n  hosts:\n    gateway-gpu-a:\n    gateway-gpu-b:\n")
    fewer = playbook("site.yml", "-i", two, "--tags", "gateway", "-e", "gateway_fleet_group=gateway_two")
    check("the gateway can serve from two boxes", fewer.returncode == 0 and sorted(servers()) == BOXES[:2],
          str(sorted(servers())))
    streams = Streams(4)
    streams.start()
    added = playbook("site.yml", "--tags", "gateway")
    streams.finish()
    reloads = added.stdout.count("RUNNING HANDLER [glm53.tensorfold.gateway : Reload HAProxy]")
    check("an added box joins with one reload", added.returncode == 0 and sorted(servers()) == BOXES and reloads == 1,
          "rc %d, %d reload(s), servers %s" % (added.returncode, reloads, sorted(servers())))
    check("replies streaming back to back through the reload all finish", streams.ok > 0 and not streams.failed,
          "%d finished, %d failed %s" % (streams.ok, len(streams.failed), streams.failed[:3]))

    # 3. a rolling restart under load
    before = dict((box, started_at(box)) for box in BOXES)
    watcher = Watcher()
    watcher.start()
    load, folder = aiperf("restart", requests=RESTART_REQUESTS, concurrency=8)
    time.sleep(3)
    began = time.time()
    restart = playbook("site.yml", "--tags", "restart")
    restart_s = time.time() - began
    time.sleep(AFTER_RESTART_S)
    load_still_running = load.poll() is None
    if load_still_running:
        load.send_signal(signal.SIGINT)
    result = aiperf_result(load, folder)
    watcher.stop = True
    watcher.join()
    after = dict((box, started_at(box)) for box in BOXES)
    check("--tags restart ran", restart.returncode == 0,
          "rc %d in %.0f s; %s" % (restart.returncode, restart_s, restart.stdout[-1500:] if restart.returncode else ""))
    check("the load lasted the whole rolling restart", load_still_running,
          "aiperf finished before the restart did: raise its request count")
    check("no failed request during the rolling restart",
          result["errors"] == 0 and result["requests"] > 0 and result["rc"] == 0,
          "%d requests sent, %d failed, aiperf rc %s %s" % (
              result["requests"], result["errors"], result["rc"], result.get("error_summary") or ""))
    check("every box restarted", all(before[b] != after[b] and after[b] for b in BOXES),
          "; ".join("%s %s -> %s" % (b, before[b], after[b]) for b in BOXES))
    for box in BOXES:
        windows = watcher.drained_windows(box)
        # A request the gateway sent just before the drain was read may start a moment later.
        leaks = [t for t in client_starts(box) for (start, end) in windows if start + 0.3 < t < end]
        check("%s got no new request while drained" % box, bool(windows) and not leaks,
              "%d drained window(s) %s; %d request(s) started inside" % (
                  len(windows), ", ".join("%.1f s" % (e - s) for s, e in windows), len(leaks)))

    # 4. a wedged box under load
    wedged = "gateway-gpu-b"
    load, folder = aiperf("wedge", requests=200, concurrency=8, timeout_s=15.0)
    time.sleep(4)
    in_box(wedged, "touch %s" % WEDGE)
    wedged_at = time.time()
    out_at = wait_for(lambda: time.time() if servers().get(wedged, ("",))[0] == "DOWN" else None, 30)
    taken = (out_at - wedged_at) if out_at else None
    check("a wedged box is out of rotation within two check intervals", taken is not None
          and taken <= 2 * CHECK_INTERVAL, "out after %s s (two intervals: %.0f s)" % (
              "%.1f" % taken if taken is not None else "never", 2 * CHECK_INTERVAL))
    during = aiperf_result(load, folder)
    print("INFO load while wedging: %d requests, %d failed (sent to %s before it was taken out)"
          % (during["requests"], during["errors"], wedged), flush=True)
    load, folder = aiperf("after-wedge", requests=120, concurrency=8, timeout_s=15.0)
    after_wedge = aiperf_result(load, folder)
    late = client_starts(wedged, after=(out_at or time.time()) + 0.2)
    check("no request fails once the wedged box is out", after_wedge["errors"] == 0
          and after_wedge["requests"] == 120 and not late,
          "%d requests, %d failed, %d reached %s" % (after_wedge["requests"], after_wedge["errors"], len(late), wedged))
    report_run = playbook("site.yml", "--tags", "gateway")
    report, site_report = read_report()
    check("the fleet report names the wedged box down at the gateway",
          re.search(r"\*\*%s\*\* at the gateway: down" % wedged, report) is not None and "Gateway: http://" in report,
          "rc %d; %s" % (report_run.returncode, " | ".join(line for line in report.splitlines() if "ateway" in line)))
    before = dict((box, started_at(box)) for box in BOXES)
    heal = playbook("heal.yml")
    after = dict((box, started_at(box)) for box in BOXES)
    restarted = sorted(b for b in BOXES if before[b] != after[b])
    said = " | ".join(line.strip() for line in heal.stdout.splitlines() if "heal: " in line)
    check("heal.yml restarts exactly the wedged box", heal.returncode == 0 and restarted == [wedged],
          "rc %d, restarted %s; %s" % (heal.returncode, restarted, said[-600:]))
    check("the healed box is back in rotation", wait_for(lambda: servers().get(wedged, ("",))[0] == "UP", 30),
          str(servers()))
    # heal's report: each box as the gateway has it after heal (the healthy ones as its probe read
    # them, the restarted one as its return left it), at the URL site.yml's report shows.
    heal_md, heal_report = read_report()
    states = gateway_states(heal_report)
    site_urls = site_report.get("gateways") or ["(none in site.yml's report)"]
    check("heal's report has each healthy box up at the gateway",
          all(states.get(box) == "up" for box in BOXES if box != wedged), "states %s" % states)
    check("heal's report has the restarted box as its return left it: up", states.get(wedged) == "up",
          "states %s; %s" % (states, " | ".join(line for line in heal_md.splitlines() if "ateway" in line)))
    check("heal's report names the gateway by site.yml's URL, all boxes up",
          heal_report.get("gateways") == site_urls and "Gateway: %s (3 of 3 boxes up)." % site_urls[0] in heal_md,
          "heal's %s, site.yml's %s" % (heal_report.get("gateways"), site_urls))
    planned = playbook("heal.yml", "--check")
    _md, planned_report = read_report()
    check("heal.yml --check reports each box up at the gateway, and restarts nothing",
          planned.returncode == 0 and gateway_states(planned_report) == dict((box, "up") for box in BOXES)
          and "heal: %s: healthy, left alone" % wedged in planned.stdout,
          "rc %d, states %s" % (planned.returncode, gateway_states(planned_report)))

    # 5. a deploy that changes a setting of two boxes, under load
    changed = ["gateway-gpu-a", "gateway-gpu-b"]
    extra = os.path.join(EPHEMERAL, "changed-setting.yml")
    with open(extra, "w") as handle:
        handle.write("tensorfold_max_tokens: \"{{ 16384 if inventory_hostname in %s else 32768 }}\"\n" % changed)
    wait_for(lambda: all(s[0] == "UP" for s in servers().values()), 30)
    before = dict((box, started_at(box)) for box in BOXES)
    watcher = Watcher()
    watcher.start()
    streams = Streams(6)
    streams.start()
    time.sleep(2)
    began = time.time()
    deploy = playbook("site.yml", "--tags", "start,smoke,gateway", "-e", "@" + extra)
    deploy_s = time.time() - began
    streams.finish()
    watcher.stop = True
    watcher.join()
    after = dict((box, started_at(box)) for box in BOXES)
    check("a deploy with a changed setting ran", deploy.returncode == 0,
          "rc %d in %.0f s; %s" % (deploy.returncode, deploy_s, deploy.stdout[-1500:] if deploy.returncode else ""))
    check("no failed request during the deploy", streams.ok > 0 and not streams.failed,
          "%d finished, %d failed %s" % (streams.ok, len(streams.failed), streams.failed[:3]))
    replaced = sorted(b for b in BOXES if before[b] != after[b])
    check("the deploy replaced the changed boxes only", replaced == changed, "replaced %s" % replaced)
    windows = dict((box, [w for w in watcher.drained_windows(box) if w[0] >= began]) for box in BOXES)
    check("the unchanged box was not drained", not windows["gateway-gpu-c"], str(windows["gateway-gpu-c"]))
    spans = sorted((w[0], w[1], box) for box in changed for w in windows[box])
    overlap = [(a[2], b[2]) for a, b in zip(spans, spans[1:]) if b[0] <= a[1]]
    batches = deploy.stdout.count("PLAY [Rolling restart, a few hosts at a time]")
    said = [line.strip() for line in deploy.stdout.splitlines() if "drained at" in line or "rolling restart" in line]
    check("the changed boxes were drained one at a time", len(spans) == 2 and not overlap,
          "; ".join("%s drained %.1f-%.1f s" % (box, start - began, end - began) for start, end, box in spans)
          + "; restart play in %d batch(es); states seen: %s; %s" % (
              batches, ", ".join("%s %s at %.1f s" % (name, status, when - began)
                                 for when, name, status in watcher.changes if when >= began),
              " | ".join(said)[-800:]))
    for box in changed:
        leaks = [t for t in client_starts(box, after=began) for (start, end) in windows[box] if start + 0.3 < t < end]
        check("%s got no new request while drained for the deploy" % box, bool(windows[box]) and not leaks,
              "%d request(s) started inside" % len(leaks))

    # 6. the canary
    places = {}
    with open(os.path.join(EPHEMERAL, "ansible-output.log")) as handle:
        places["Ansible's output"] = handle.read()
    places["the controller's command lines"] = "\n".join(watcher.commands)
    for box in BOXES + [GATEWAY]:
        places["%s command lines" % box] = in_box(box, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout
    for box in BOXES:
        places["%s docker inspect" % box] = in_box(box, "docker inspect %s" % CONTAINER).stdout
    places["haproxy.cfg"] = in_box(GATEWAY, "cat /etc/haproxy/haproxy.cfg").stdout
    places["HAProxy's logs"] = in_box(GATEWAY, "cat /var/log/haproxy.log /var/log/syslog 2>/dev/null || true").stdout
    places["aiperf's artifacts"] = KEY if sh(["grep", "-rlF", KEY, EPHEMERAL + "/aiperf-restart"]).returncode == 0 else ""
    found = sorted(name for name, text in places.items() if KEY in text)
    check("the API key is nowhere but its files", not found, "found in %s" % found if found else
          "looked in %d places" % len(places))
    mode = in_box(GATEWAY, "stat -c '%a %U:%G' /etc/haproxy/glm53-api-key.map").stdout.strip()
    check("the gateway's key map is readable by root and haproxy only", mode == "640 root:haproxy", mode)

    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
