#!/usr/bin/env python3
"""Print how many requests each stand-in of the Internet has logged, as JSON (tests only).

The Hub emulator logs one JSON line per request; the stand-in repositories and sources are
python -m http.server, which logs one line per request. Read through docker exec, so it works
on boxes of an internal network too.
"""
import json
import subprocess

LOGS = {
    "airgapped-hub": ["/var/log/hub.jsonl"],
    "airgapped-builder": ["/var/log/glm53-http-8080.log", "/var/log/glm53-http-8787.log"],
    "airgapped-gpu-a": ["/var/log/glm53-http-8080.log", "/var/log/glm53-http-8787.log"],
    "airgapped-gpu-b": ["/var/log/glm53-http-8080.log", "/var/log/glm53-http-8787.log"],
}


def count(box, path):
    out = subprocess.run(["docker", "exec", box, "sh", "-c", "cat %s 2>/dev/null || true" % path],
                         capture_output=True, text=True, check=True).stdout
    return len([line for line in out.splitlines() if '"GET ' in line or '"HEAD ' in line or line.startswith("{")])


def main():
    print(json.dumps({"%s:%s" % (box, path): count(box, path) for box, paths in LOGS.items() for path in paths},
                     indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
