#!/usr/bin/env python3
"""What molecule/airgapped checks after converge and idempotence (tests only).

1. No stand-in of the Internet was asked anything during the two deploys: the Hub emulator's,
   the builder's and each box's request logs have the counts prepare saved.
2. Both boxes are LIVE in the fleet report, and cannot reach the Hub emulator or the Internet;
   only the seed has the Hub client (the peer copies from it).
3. A flipped byte in a checkpoint shard of the bundle: bundle.yml --tags verify fails naming
   weights/model and the file; site.yml fails both boxes in pre-flight with E_BUNDLE naming them
   too, and changes nothing on either box.

usage: verify_airgapped.py INVENTORY PROJECT EPHEMERAL
"""
import glob
import json
import os
import re
import subprocess
import sys
import time

FAILS = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kw)


def recap(text):
    return dict((h, (int(c), int(f))) for h, c, f in
                re.findall(r"(?m)^(\S+)\s+: ok=\d+\s+changed=(\d+).*?failed=(\d+)", text))


def main():
    inventory, project, eph = sys.argv[1:4]
    here = os.path.dirname(os.path.abspath(__file__))
    before = json.load(open(os.path.join(eph, "request-logs-before.json")))
    after = json.loads(run([sys.executable, os.path.join(here, "request_logs.py")]).stdout)
    asked = dict((k, after[k] - before.get(k, 0)) for k in after if after[k] != before.get(k, 0))
    check(not asked, "no stand-in was asked anything during the deploys %s" % (asked or ""))

    report = json.load(open(os.path.join(eph, "reports", "fleet-report.json")))
    hosts = dict((h["host"], h["status"]) for h in report["hosts"])
    check(hosts.get("airgapped-gpu-a") == "live" and hosts.get("airgapped-gpu-b") == "live",
          "both boxes LIVE in the fleet report %s" % hosts)
    for box in ("airgapped-gpu-a", "airgapped-gpu-b"):
        probe = run(["docker", "exec", box, "python3", "-c",
                     "import urllib.request as u\nfor url in ('http://airgapped-hub:8080/api/models/x','https://pypi.org/simple/'):\n"
                     "  try:\n    u.urlopen(url, timeout=3); print('reached', url)\n  except Exception as e: pass"])
        check("reached" not in probe.stdout, "%s reaches neither the Hub emulator nor the Internet" % box)

    # With the peer strategy only the seed (the first box) runs the Hub client; the other copies from it.
    clients = dict((box, run(["docker", "exec", box, "sh", "-c", "ls /srv/glm53/.state/hf-client 2>/dev/null"]).stdout.split())
                   for box in ("airgapped-gpu-a", "airgapped-gpu-b"))
    check(len(clients["airgapped-gpu-a"]) == 1 and clients["airgapped-gpu-b"] == [],
          "the Hub client is on the seed alone: %s" % clients)

    shards = sorted(glob.glob(os.path.join(eph, "bundle", "weights", "model", "files", "*.safetensors")))
    shard = shards[0]
    name = os.path.relpath(shard, os.path.join(eph, "bundle", "weights", "model"))
    os.chmod(shard, 0o644)
    with open(shard, "r+b") as handle:
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 0xFF]))
    env = dict(os.environ)
    t0 = time.time()
    ver = run(["ansible-playbook", "-i", inventory, "-e", "@" + os.path.join(eph, "bundle-vars.yml"),
               os.path.join(project, "playbooks", "bundle.yml"), "--tags", "verify"], env=env)
    print("bundle.yml --tags verify on the corrupted bundle: %.1f s" % (time.time() - t0))
    out = ver.stdout + ver.stderr
    check(ver.returncode != 0 and "weights/model: %s sha256 differs" % name in out,
          "bundle.yml --tags verify names weights/model and %s" % name)
    site = run(["ansible-playbook", "-i", inventory, "--limit", "airgapped_site",
                "-e", "tensorfold_bundle=%s/bundle fleet_report_dir=%s/reports-corrupt gpu_host_checks_report_dir=%s/reports-corrupt"
                % (eph, eph, eph), os.path.join(project, "playbooks", "site.yml")], env=env)
    out = site.stdout + site.stderr
    rc = recap(site.stdout)
    check(site.returncode != 0, "site.yml fails on the corrupted bundle (rc %d)" % site.returncode)
    check("[E_BUNDLE]" in out and name in out, "site.yml names E_BUNDLE and %s" % name)
    for box in ("airgapped-gpu-a", "airgapped-gpu-b"):
        check(rc.get(box, (1, 0))[0] == 0 and rc.get(box, (0, 0))[1] > 0,
              "%s failed and changed nothing %s" % (box, rc.get(box)))
    bad = json.load(open(os.path.join(eph, "reports-corrupt", "fleet-report.json")))
    stages = dict((h["host"], (h["status"], h.get("codes"), h.get("stage"))) for h in bad["hosts"])
    check(len(stages) == 2 and all(s[0] == "failed" and "E_BUNDLE" in (s[1] or []) and s[2] == "pre-flight"
                                   for s in stages.values()),
          "the report marks both boxes failed (E_BUNDLE) in pre-flight %s" % stages)
    print("%d checks failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
