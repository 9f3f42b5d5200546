#!/usr/bin/env python3
"""Checks of the fleet scenario after converge and idempotence (run by verify.yml).

1. The fleet report: fleet-gpu-a and fleet-gpu-b LIVE, fleet-gpu-c failed with E_GPU_BUSY.
2. The fast path on the converged fleet, full ``site.yml`` runs, one difference at a time on
   fleet-gpu-b while fleet-gpu-a takes the fast path (changed=0, LIVE in the report):
   (a) one setting changed (an extra inventory source, which also changes a gateway and a
   Prometheus setting for every host): only b's container is started again; its toolkit, image
   and weights steps run and change nothing, and nothing is lent;
   (b) then its image untagged and a weights file damaged: a lends both (the image and weights
   steps, nothing else ran there): the image copied from a (nothing built), the damaged file
   copied from a (nothing from the Hub), and b's container keeps running. Its new deploy record
   holds: the same run again is the fast path for both.
   Before each of (a) and (b), and after the last run, ``site.yml --check`` with the same
   settings: a takes the fast path (LIVE in the report, no step of its own but lending in (b),
   where it serves nothing), b goes the whole check-mode way with its plan (planned), and
   nothing changes on either box; on the converged fleet no deploy step runs at all.
3. ``site.yml --tags restart`` on the two serving hosts (JSON callback): one host per batch, a
   then b; only rank_container and smoke_test ran (no image build, no download, no
   re-verification, no host checks); each host's container started exactly once and its
   StartedAt moved, a's before b's.
4. ``site.yml --tags stop``: both containers gone, a new log archive on each holding runner.sh,
   rank0.log and rank1.log.

usage: verify_fleet.py INVENTORY PROJECT_DIR
"""
import json
import os
import subprocess
import sys
import time

INVENTORY, PROJECT = sys.argv[1], sys.argv[2]
SERVING = ["fleet-gpu-a", "fleet-gpu-b"]
SITE = os.path.join(PROJECT, "playbooks", "site.yml")
REPORTS = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "reports")
REPORT = os.path.join(REPORTS, "fleet-report.json")
CONTAINER = "glm53-zig"
MODEL = "/srv/glm53/model"
NOT_ON_RESTART = ("gpu_host_checks", "nvidia_toolkit", "tensorfold_image", "weights_fetch")


def box(host, *argv):
    out = subprocess.run(["docker", "exec", host, *argv], capture_output=True, text=True, check=False)
    return out.returncode, out.stdout.strip()


def started_at(host):
    rc, out = box(host, "docker", "inspect", "-f", "{{.State.Running}} {{.State.StartedAt}}", CONTAINER)
    return out if rc == 0 else None


def archives(host):
    rc, out = box(host, "sh", "-c", "ls -1 /srv/glm53/logs/*.tar.gz 2>/dev/null || true")
    return sorted(out.split())


def site(*args, inventories=()):
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    t0 = time.monotonic()
    extra = [arg for path in inventories for arg in ("-i", path)]
    run = subprocess.run(["ansible-playbook", "-i", INVENTORY, *extra, "--limit", ",".join(SERVING), SITE, *args,
                          "-e", "fleet_report_dir=%s gpu_host_checks_report_dir=%s" % (REPORTS, REPORTS)],
                         capture_output=True, text=True, env=env, check=False)
    took = time.monotonic() - t0
    try:
        doc = json.loads(run.stdout[run.stdout.index("{"):])
    except ValueError:
        sys.exit("site.yml %s printed no JSON (rc %s):\n%s\n%s" % (args, run.returncode, run.stdout[-3000:], run.stderr[-3000:]))
    return run.returncode, doc, took


def ran(task_entry):
    """Hosts on which a task ran (not skipped)."""
    return [h for h, r in task_entry["hosts"].items() if not r.get("skipped")]


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        check.failed += 1


check.failed = 0

# 1. The report of the converge runs.
with open(REPORT) as handle:
    report = json.load(handle)
rows = {row["host"]: row for row in report["hosts"]}
for host in SERVING:
    check(rows[host]["label"] == "LIVE", "%s is LIVE in the fleet report" % host)
check(rows["fleet-gpu-c"]["status"] == "failed" and "E_GPU_BUSY" in rows["fleet-gpu-c"]["codes"],
      "fleet-gpu-c failed with E_GPU_BUSY: %s" % rows["fleet-gpu-c"]["codes"])
check(rows["fleet-gpu-c"]["todo"] != "", "the failed host's line says what to do")
check(report["summary"]["live"] == 2 and report["summary"]["failed"] == 1, "summary: 2 LIVE, 1 failed")

# 2. The fast path, one difference at a time on fleet-gpu-b. (a) A setting: only its container is
# replaced; the toolkit, the image and the weights are checked and change nothing (no Hub client
# unpacked: its copy is whole). (b) Its image untagged and a weights file damaged: fleet-gpu-a
# lends both, and the container keeps running (same image id, the file made whole again).
DEPLOY_ROLES = ("gpu_host_checks", "nvidia_toolkit", "smoke_test")
LENDING_ROLES = ("tensorfold_image", "weights_fetch")
CHECKED_ONLY = ("gpu_host_checks", "nvidia_toolkit", "tensorfold_image", "weights_fetch")


def roles_on(doc, role):
    """Hosts on which a task of ROLE ran in the steps after pre-flight (which checks every box's
    settings on the controller)."""
    steps = [t for p in doc["plays"] if not p["play"]["name"].startswith("Pre-flight") for t in p["tasks"]]
    return sorted({h for t in steps if (".%s : " % role) in "." + t["task"]["name"] for h in ran(t)})


def changed_by(doc, role, words="", host=None):
    return sorted({h for p in doc["plays"] for t in p["tasks"]
                   if (".%s : " % role) in "." + t["task"]["name"] and words in t["task"]["name"]
                   for h, r in t["hosts"].items() if r.get("changed") and h == (host or h)})


def engine_changed(doc):
    return {h: r.get("changed") for p in doc["plays"] for t in p["tasks"]
            if "Start, restart or stop the engine container" in t["task"]["name"] for h, r in t["hosts"].items()}


def only_b_worked(doc, what):
    stats = doc.get("stats", {})
    check(stats.get("fleet-gpu-a", {}).get("changed", 0) == 0, "%s: fleet-gpu-a changed nothing: %s %s" % (
        what, stats.get("fleet-gpu-a"), [t["task"]["name"] for p in doc["plays"] for t in p["tasks"]
                                         if t["hosts"].get("fleet-gpu-a", {}).get("changed")]))
    check(stats.get("fleet-gpu-b", {}).get("changed", 0) > 0, "%s: fleet-gpu-b changed: %s" % (what, stats.get("fleet-gpu-b")))
    for role in DEPLOY_ROLES:
        check(roles_on(doc, role) == ["fleet-gpu-b"], "%s: %s ran on fleet-gpu-b only: %s" % (what, role, roles_on(doc, role)))


# Every step a box being deployed takes (in check mode too), the plan among them.
ALL_STEPS = ("gpu_host_checks", "nvidia_toolkit", "tensorfold_image", "weights_fetch", "fleet_plan", "rank_container",
             "smoke_test")


def record(host):
    return box(host, "cat", "/srv/glm53/.state/deployed.json")[1]


def verdicts(doc):
    """Pre-flight's line per box (the fast path's verdict)."""
    return sorted({line for p in doc["plays"] for t in p["tasks"] if t["task"]["name"].endswith("Say which boxes are converged")
                   for r in t["hosts"].values() if not r.get("skipped") for line in r.get("msg") or []})


def check_run(what, converged, lends=()):
    """site.yml --check with the override: the boxes of ``converged`` take the fast path (only the
    lending steps ``lends`` run there), the others every step in check mode; nothing changes."""
    before = {h: (started_at(h), record(h)) for h in SERVING}
    rc, doc, took = site("--check", inventories=[override])
    print("%s, --check: %.1f s" % (what, took))
    check(rc == 0, "%s --check exits 0 (rc %s)" % (what, rc))
    others = [h for h in SERVING if h not in converged]
    for role in ALL_STEPS:
        expected = sorted(others + (list(converged) if role in lends else []))
        check(roles_on(doc, role) == expected, "%s --check: %s ran on %s: %s" % (what, role, expected, roles_on(doc, role)))
    for host in converged:
        check(doc["stats"].get(host, {}).get("changed", 0) == 0, "%s --check: %s reports no change: %s" % (
            what, host, doc["stats"].get(host)))
        line = [v for v in verdicts(doc) if v.startswith(host + ": ")]
        check(len(line) == 1 and "converged, LIVE at " in line[0] and "nothing would change" in line[0],
              "%s --check: pre-flight says %s is converged and nothing would change: %s" % (what, host, line))
    check({h: (started_at(h), record(h)) for h in SERVING} == before,
          "%s --check: both containers and deploy records untouched" % what)
    with open(REPORT) as handle:
        labels = dict((row["host"], row["label"]) for row in json.load(handle)["hosts"])
    wanted = dict((h, "LIVE" if h in converged else "planned (check mode)") for h in SERVING)
    check(dict((h, labels.get(h)) for h in SERVING) == wanted, "%s --check: the report reads %s: %s" % (what, wanted, labels))
    return doc


override = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "fast-path-override.yml")
with open(override, "w") as handle:
    # Settings of the gateway and the Prometheus host change for every host: they shape no GPU box,
    # so fleet-gpu-a stays on the fast path.
    json.dump({"all": {"vars": {"gateway_drain_timeout": 45, "monitoring_scrape_interval": "20s"},
                       "hosts": {"fleet-gpu-b": {"tensorfold_max_tokens": 16384}}}}, handle)

# (a) One setting: first what --check says (only fleet-gpu-b would be deployed).
check_run("(a) one setting changed", converged=["fleet-gpu-a"])
before = {h: started_at(h) for h in SERVING}
rc, doc, took = site(inventories=[override])
print("one setting changed on one box, full run: %.1f s" % took)
check(rc == 0, "(a) the full run with fleet-gpu-b's setting changed exits 0 (rc %s)" % rc)
only_b_worked(doc, "(a)")
for role in LENDING_ROLES:
    check(roles_on(doc, role) == ["fleet-gpu-b"], "(a) %s ran on fleet-gpu-b alone, nothing lent: %s" % (role, roles_on(doc, role)))
for role in CHECKED_ONLY:
    check(changed_by(doc, role, host="fleet-gpu-b") == [], "(a) %s changed nothing on fleet-gpu-b: %s" % (
        role, [t["task"]["name"] for p in doc["plays"] for t in p["tasks"]
               if (".%s : " % role) in "." + t["task"]["name"] and t["hosts"].get("fleet-gpu-b", {}).get("changed")]))
check(engine_changed(doc) == {"fleet-gpu-b": True}, "(a) only fleet-gpu-b's engine container was started again: %s" % engine_changed(doc))
after = {h: started_at(h) for h in SERVING}
check(after["fleet-gpu-a"] == before["fleet-gpu-a"], "(a) fleet-gpu-a's container kept running untouched")
check(after["fleet-gpu-b"] != before["fleet-gpu-b"] and after["fleet-gpu-b"].startswith("true"),
      "(a) fleet-gpu-b's container runs again with the new setting")

# (b) The image and a weights file, the setting as recorded now.
before = after
image_ref = box("fleet-gpu-b", "docker", "inspect", "-f", "{{.Config.Image}}", CONTAINER)[1]
image_id = {h: box(h, "docker", "image", "inspect", "-f", "{{.Id}}", image_ref)[1] for h in SERVING}
check(image_ref and image_id["fleet-gpu-a"] == image_id["fleet-gpu-b"] != "", "both boxes hold %s: %s" % (image_ref, image_id))
box("fleet-gpu-b", "docker", "rmi", "-f", image_ref)  # untagged; the running container keeps its layers
weights_file = box("fleet-gpu-b", "sh", "-c", "ls -S %s/*.safetensors | head -1" % MODEL)[1]
digest = {h: box(h, "sha256sum", weights_file)[1].split()[:1] for h in SERVING}
box("fleet-gpu-b", "python3", "-c", "import sys; f = open(sys.argv[1], 'r+b'); b = f.read(1); f.seek(0); "
    "f.write(bytes([b[0] ^ 255]))", weights_file)  # same size, other bytes, a new mtime
check(weights_file and digest["fleet-gpu-a"] == digest["fleet-gpu-b"] != box("fleet-gpu-b", "sha256sum", weights_file)[1].split()[:1],
      "fleet-gpu-b's %s damaged" % weights_file)
# In check mode the lender joins the image and weights steps and serves nothing: b would load and copy.
doc = check_run("(b) image and weights file gone", converged=["fleet-gpu-a"], lends=LENDING_ROLES)
tasks = [t for p in doc["plays"] for t in p["tasks"]]
served = sorted({h for t in tasks if t["task"]["name"].split(" : ")[-1] in (
    "Save the image on the build host", "Start serving the verified copy on the address the peers use") for h in ran(t)})
check(served == [], "(b) --check: the lender serves nothing: %s" % served)
would_load = sorted({h for t in tasks if "Report the move check mode would make" in t["task"]["name"] for h in ran(t)})
check(would_load == ["fleet-gpu-b"], "(b) --check: fleet-gpu-b would load the image from its lender: %s" % would_load)
check(box("fleet-gpu-b", "docker", "image", "inspect", image_ref)[0] != 0
      and box("fleet-gpu-b", "sha256sum", weights_file)[1].split()[:1] != digest["fleet-gpu-a"],
      "(b) --check: fleet-gpu-b still lacks the image and its file is still damaged")
rc, doc, took = site(inventories=[override])
print("one box's image and weights file gone, full run: %.1f s" % took)
check(rc == 0, "(b) the full run exits 0 (rc %s)" % rc)
only_b_worked(doc, "(b)")
for role in LENDING_ROLES:
    check(roles_on(doc, role) == SERVING, "(b) %s ran on fleet-gpu-b and its lender fleet-gpu-a: %s" % (role, roles_on(doc, role)))
check(changed_by(doc, "tensorfold_image", "Build") == [], "(b) no image was built: %s" % changed_by(doc, "tensorfold_image", "Build"))
LOADED_FROM_PEER = "Load the build host's image as it arrives"
check(changed_by(doc, "tensorfold_image", LOADED_FROM_PEER) == ["fleet-gpu-b"],
      "(b) fleet-gpu-b loaded the image from fleet-gpu-a: %s" % changed_by(doc, "tensorfold_image", LOADED_FROM_PEER))
got = box("fleet-gpu-b", "docker", "image", "inspect", "-f", "{{.Id}}", image_ref)[1]
check(got == image_id["fleet-gpu-a"], "(b) fleet-gpu-b holds fleet-gpu-a's image again: %s" % got)
check(changed_by(doc, "weights_fetch") == ["fleet-gpu-b"], "(b) only fleet-gpu-b's weights changed: %s" % changed_by(doc, "weights_fetch"))
tasks = [t for p in doc["plays"] for t in p["tasks"]]
hub = sorted({h for t in tasks if "Fetch every repository from the Hub" in t["task"]["name"] for h in ran(t)})
copied = sorted({h for t in tasks if "Copy every repository from the host that serves" in t["task"]["name"] for h in ran(t)})
check(hub == ["fleet-gpu-a"] and copied == ["fleet-gpu-b"], "(b) fleet-gpu-b copied its weights from fleet-gpu-a, "
      "only the lender asked the Hub: Hub %s, copied %s" % (hub, copied))
got = box("fleet-gpu-b", "sha256sum", weights_file)[1].split()[:1]
check(got == digest["fleet-gpu-a"], "(b) fleet-gpu-b's damaged file is whole again: %s" % got)
# The container already runs that image id, and it read the weights before the damage.
check(engine_changed(doc) == {"fleet-gpu-b": False}, "(b) fleet-gpu-b's engine container was checked, not started again: %s"
      % engine_changed(doc))
check({h: started_at(h) for h in SERVING} == before, "(b) both containers kept running untouched")
with open(REPORT) as handle:
    rows = {row["host"]: row for row in json.load(handle)["hosts"]}
check(all(rows[h]["label"] == "LIVE" for h in SERVING), "both boxes LIVE in the report: %s" % [rows[h]["label"] for h in SERVING])
rc, doc, took = site(inventories=[override])
print("the same run again: %.1f s" % took)
# A converged box runs no task of its own (pre-flight reads every box from one worker), so it may
# have no line in the recap at all: no line is no change.
check(rc == 0 and all(doc["stats"].get(h, {}).get("changed", 0) == 0 for h in SERVING),
      "run again with the same override, both boxes take the fast path: %s" % doc.get("stats"))
# --check on the converged fleet: no deploy step, no plan, both LIVE.
check_run("the converged fleet", converged=SERVING)

# 3. Rolling restart.
before = {h: started_at(h) for h in SERVING}
archives_before = {h: archives(h) for h in SERVING}
rc, doc, took = site("--tags", "restart")
print("restart run: %.1f s" % took)
check(rc == 0, "--tags restart exits 0 (rc %s)" % rc)
restart_plays = [p for p in doc["plays"] if p["play"]["name"].startswith("Rolling restart")]
batches = [sorted({h for t in p["tasks"] for h in t["hosts"]}) for p in restart_plays]
check(batches == [["fleet-gpu-a"], ["fleet-gpu-b"]], "restart went one host at a time, a then b: %s" % batches)
ran_roles = sorted({t["task"]["name"].split(" : ")[0] for p in doc["plays"] for t in p["tasks"]
                    if " : " in t["task"]["name"] and ran(t)})
for role in NOT_ON_RESTART:
    check(not any(role in r for r in ran_roles), "no %s task ran on restart" % role)
starts = {}
for p in restart_plays:
    for t in p["tasks"]:
        for h, r in t["hosts"].items():
            facts = r.get("ansible_facts", {})
            if "rank_container_result" in facts:
                starts[h] = facts["rank_container_result"].get("starts")
check(starts == {"fleet-gpu-a": 1, "fleet-gpu-b": 1}, "each container started exactly once: %s" % starts)
after = {h: started_at(h) for h in SERVING}
for h in SERVING:
    check(after[h] and after[h].startswith("true") and after[h] != before[h],
          "%s restarted and runs: %s -> %s" % (h, before[h], after[h]))
check(after["fleet-gpu-a"].split()[1] < after["fleet-gpu-b"].split()[1], "a came back before b restarted")
for h in SERVING:
    check(len(archives(h)) == len(archives_before[h]) + 1, "%s archived the previous session's logs" % h)

# 4. Stop.
archives_before = {h: archives(h) for h in SERVING}
rc, doc, took = site("--tags", "stop")
print("stop run: %.1f s" % took)
check(rc == 0, "--tags stop exits 0 (rc %s)" % rc)
for h in SERVING:
    check(started_at(h) is None, "%s: the container is gone" % h)
    new = sorted(set(archives(h)) - set(archives_before[h]))
    check(len(new) == 1, "%s: one new archive %s" % (h, new))
    if new:
        listing = box(h, "tar", "-tzf", new[0])[1]
        names = {os.path.basename(n) for n in listing.split()}
        check({"runner.sh", "rank0.log", "rank1.log"} <= names, "%s: the archive holds runner.sh and both rank logs: %s"
              % (h, sorted(names)))

sys.exit(1 if check.failed else 0)
