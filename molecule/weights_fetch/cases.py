#!/usr/bin/env python3
# -*- coding: utf-8 -*-
"""The weights_fetch scenario's cases, after converge (peer strategy across three boxes); what
converge left (files, modes, verification records, the Hub's one download) is checked by
tests/test_weights.py first.

Each case runs the role again with ansible-playbook (nested, its output kept), then asserts on
that output, on the boxes' files and on the Hub emulator's request log. Exit status 0 only when
every case passed; a line per case either way.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HUB = "weights_fetch-hub"
BOXES = ["weights_fetch-gpu-a", "weights_fetch-gpu-b", "weights_fetch-gpu-c"]
A, B, C = BOXES
MODEL_REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold"
ABLIT_REPO = MODEL_REPO + "-Ablit"
DRAFTER_REPO = "incoai/GLM-5.3-Flash-DFlash2"
CANARY = "wfCanary"
TOKEN_OK = "hf_wfCanaryAcceptedToken7781"
TOKEN_DENIED = "hf_wfCanaryDeniedToken5513"
TOKEN_BOGUS = "hf_wfCanaryBogusToken4242"
MIB = 1024 * 1024
OUTPUTS = []
FAILED = []

PLAYBOOK = """
- hosts: gpu_hosts
  gather_facts: false
  roles:
    - role: glm53.tensorfold.weights_fetch
  post_tasks:
    - name: Show the published facts
      ansible.builtin.debug:
        msg: "FACTS {{ {'model': weights_fetch_model_path, 'revision': weights_fetch_model_revision,
               'drafter': weights_fetch_drafter_path} | to_json }}"
"""


def sh(cmd, check=True, **kwargs):
    proc = subprocess.run(cmd, shell=isinstance(cmd, str), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed: %s" % (cmd, proc.stdout[-2000:]))
    return proc.stdout


def box(name, script, check=True):
    return sh(["docker", "exec", name, "bash", "-c", script], check=check)


def hub_log():
    text = box(HUB, "cat /var/log/hub.jsonl")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def hub_reset():
    box(HUB, "curl -s -XPOST localhost:8080/_emulator/reset && : > /var/log/hub.jsonl")


def hub_faults(faults):
    box(HUB, "curl -s -XPOST -d %s localhost:8080/_emulator/faults" % sh(["printf", "%q", json.dumps(faults)]))


def downloads(log):
    """GETs that carry file bytes from the Hub (resolve of small files, CDN of LFS files)."""
    return [e for e in log if e["method"] == "GET" and ("/resolve/" in e["path"] or "/cdn-lfs/" in e["path"])
            and e["status"] in (200, 206)]


WORK = tempfile.mkdtemp(prefix="weights_fetch-cases-")


def play(hosts, extra=None, check=False, background=False):
    """Run the role on some boxes; return (rc, output) or the Popen when in the background."""
    inventory = {"gpu_hosts": {"hosts": dict((h, {"ansible_connection": "community.docker.docker"}) for h in hosts),
                               "vars": {"tensorfold_data_dir": "/srv/glm53",
                                        "tensorfold_hf_endpoint": "http://weights_fetch-hub:8080",
                                        "weights_fetch_strategy": "hub", "weights_fetch_progress_interval": 3,
                                        "ansible_python_interpreter": "/usr/bin/python3"}}}
    with open(os.path.join(WORK, "inventory.json"), "w") as handle:
        json.dump({"all": {"children": inventory}}, handle)
    with open(os.path.join(WORK, "play.yml"), "w") as handle:
        handle.write(PLAYBOOK)
    with open(os.path.join(WORK, "extra.json"), "w") as handle:
        json.dump(extra or {}, handle)
    cmd = ["ansible-playbook", "-i", os.path.join(WORK, "inventory.json"), os.path.join(WORK, "play.yml"),
           "-e", "@" + os.path.join(WORK, "extra.json")] + (["--check"] if check else [])
    # JSON results: one line per message, nothing wrapped.
    env = dict(os.environ, ANSIBLE_CALLBACK_RESULT_FORMAT="json", ANSIBLE_NOCOLOR="1")
    if background:
        # Output to a file, not a pipe nobody reads while the run goes on (a full pipe stalls it).
        log = open(os.path.join(WORK, "background-%d.log" % len(OUTPUTS)), "w+")  # pylint: disable=consider-using-with
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
        proc.log = log
        return proc
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False,
                          env=env)
    OUTPUTS.append(proc.stdout)
    return proc.returncode, proc.stdout


def finish(proc):
    """Kill a background run (only the process this case started) and keep its output."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=60)
    proc.log.seek(0)
    text = proc.log.read()
    proc.log.close()
    OUTPUTS.append(text)
    return text


def recap_changed(output, host):
    for line in output.splitlines():
        if line.startswith(host + " ") and "changed=" in line:
            return int(line.split("changed=")[1].split()[0])
    raise AssertionError("no recap line for %s" % host)


def facts(output, host):
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("ok: [%s]" % host) and i + 1 < len(lines) and '"msg": "FACTS ' in lines[i + 1]:
            message = json.loads(lines[i + 1].split('"msg": ', 1)[1].rstrip(","))
            return json.loads(message[len("FACTS "):])
    raise AssertionError("no facts printed for %s" % host)


def source_sha(repo, path):
    return box(HUB, "sha256sum /repos/%s/%s" % (repo, path)).split()[0]


def box_sha(name, path):
    return box(name, "sha256sum %s" % path).split()[0]


def case(func):
    began = time.time()
    try:
        func()
    except AssertionError as err:
        FAILED.append(func.__name__)
        print("FAIL %s (%.0fs): %s" % (func.__name__, time.time() - began, err))
        return
    print("PASS %s (%.0fs)" % (func.__name__, time.time() - began))


# --- cases ---------------------------------------------------------------------------------------
def rerun_makes_no_hub_request_and_no_change():
    hub_reset()
    rc, out = play(BOXES, {"weights_fetch_strategy": "peer"})
    assert rc == 0, out[-3000:]
    for name in BOXES:
        assert recap_changed(out, name) == 0, "%s changed on a re-run" % name
    assert hub_log() == [], "the re-run sent %d requests to the Hub" % len(hub_log())


def corrupted_shard_is_detected_and_repaired():
    shard = "/srv/glm53/model/model-00002-of-00003.safetensors"
    box(B, "chmod u+w %s && printf 'Z' | dd of=%s bs=1 seek=1000 conv=notrunc status=none" % (shard, shard))
    hub_reset()
    rc, out = play([B])
    assert rc == 0, out[-3000:]
    assert "repaired model-00002-of-00003.safetensors" in out, "the repair was not reported"
    assert box_sha(B, shard) == source_sha(MODEL_REPO, "model-00002-of-00003.safetensors")
    fetched = downloads(hub_log())
    assert len(fetched) == 1 and fetched[0]["bytes"] == 2 * MIB, "expected one re-fetch of the shard: %s" % fetched


def partial_records(name, folder):
    """The resume records of the partial files under ``folder`` (one JSON line each, space-padded)."""
    text = box(name, "for f in %s/partial/*.json; do [ -e \"$f\" ] && cat \"$f\" && echo; done; true" % folder)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def kill_mid_file_resumes_with_a_range_request():
    extra = {"tensorfold_data_dir": "/srv/resume", "tensorfold_drafter": "none", "weights_fetch_chunk_mib": 1}
    state = "/srv/resume/.state/weights/model"
    hub_reset()
    # Slow enough that where the kill lands does not depend on the machine: each body at 0.2 MB/s
    # takes 10 s per 2 MiB shard (two at once), and the kill is sent once every partial file has
    # recorded a resume point past 1 MiB, with a second or more of each file still to come.
    hub_faults({"throttle_bps": 200000})
    proc = play([A], extra, background=True)
    deadline = time.time() + 90
    records = []
    while time.time() < deadline and proc.poll() is None:
        records = partial_records(A, state)
        if records and all(r["committed"] >= MIB for r in records):
            break
        time.sleep(0.3)
    assert records and all(r["committed"] >= MIB for r in records), "no resume point past 1 MiB: %s" % records
    pids = box(A, "pgrep -f AnsiballZ_hf_snapshot || true").split()
    assert pids, "no hf_snapshot process to kill"
    box(A, "kill -9 %s" % " ".join(pids))
    finish(proc)  # the operator's run dies with it (as on a reboot)
    # What the killed download recorded: the points the rerun must resume from.
    records = dict((r["path"], r) for r in partial_records(A, state))
    partial_sizes = [int(n) for n in box(A, "stat -c %%s %s/partial/*.incomplete" % state).split()]
    assert records and len(partial_sizes) == len(records), "partial files %s, records %s" % (partial_sizes, records)
    for record in records.values():
        # hf_transfer commits every half chunk (weights_fetch_chunk_mib is 1 here).
        assert record["committed"] > 0 and record["committed"] % (MIB // 2) == 0, (
            "recorded %d, not a half-chunk boundary" % record["committed"])
    hub_faults({})
    hub_reset()
    rc, out = play([A], extra)
    assert rc == 0, out[-3000:]
    # Only the rerun's requests: the killed run's throttled bodies are logged when the emulator
    # notices the closed connection, maybe after the reset; none of them had a Range.
    fetches = [e for e in downloads(hub_log()) if e.get("range")]
    resumed = dict((e["path"].rsplit("/", 1)[-1], e) for e in fetches)
    digests = dict((r["digest"], path) for path, r in records.items())
    assert len(fetches) == len(records) and set(resumed) == set(digests), (
        "expected a Range request per partial file %s, got %s" % (sorted(records), fetches))
    for digest, fetch in resumed.items():
        start = int(fetch["range"].split("=")[1].rstrip("-"))
        committed = records[digests[digest]]["committed"]
        assert start == committed, "%s resumed from %d, its record says %d" % (digests[digest], start, committed)
        assert fetch["status"] == 206, "the resume was answered %s" % fetch["status"]
        print("  resumed %s from byte %d (on disk: %s)" % (digests[digest], start, partial_sizes))
    for shard in ("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                  "model-00003-of-00003.safetensors"):
        assert box_sha(A, "/srv/resume/model/" + shard) == source_sha(MODEL_REPO, shard)
    assert "No such file" in box(A, "ls %s/partial 2>&1 || true" % state)


def gated_401_and_403_have_their_messages():
    rc, out = play([C], {"tensorfold_ablit": True, "tensorfold_hf_token": TOKEN_BOGUS})
    assert rc != 0 and "[E_HF_TOKEN]" in out and "the Hub does not accept this token" in out, out[-3000:]
    rc, out = play([C], {"tensorfold_ablit": True, "tensorfold_hf_token": TOKEN_DENIED})
    assert rc != 0 and "[E_HF_TOKEN]" in out, out[-3000:]
    assert "has not agreed to the repository's terms: open its page, accept, retry" in out, out[-3000:]
    assert "No such file" in box(C, "ls /srv/glm53/.state/weights/model-ablit.hf-token 2>&1 || true"), (
        "a failed download left the token's file")


def ablit_with_a_token_then_back_with_no_download():
    hub_reset()
    rc, out = play([C], {"tensorfold_ablit": True, "tensorfold_hf_token": TOKEN_OK})
    assert rc == 0, out[-3000:]
    assert facts(out, C)["model"] == "/srv/glm53/model-ablit"
    assert box_sha(C, "/srv/glm53/model-ablit/model-00001-of-00003.safetensors") == source_sha(
        ABLIT_REPO, "model-00001-of-00003.safetensors")
    assert all(e["auth"] for e in hub_log() if "/resolve/" in e["path"]), "a gated request went without the token"
    assert not any(e["auth"] for e in hub_log() if "/cdn-lfs/" in e["path"]), "the token went to the CDN"
    assert "No such file" in box(C, "ls /srv/glm53/.state/weights/model-ablit.hf-token 2>&1 || true"), (
        "the token's file outlived the download")
    # One an interrupted run left (killed before its download read it) goes with the next run.
    box(C, "install -m 600 /dev/null /srv/glm53/.state/weights/model-ablit.hf-token")
    hub_reset()
    rc, out = play([C], {"tensorfold_ablit": False})
    assert rc == 0, out[-3000:]
    assert facts(out, C) == {"model": "/srv/glm53/model", "revision": "078455ffe6472f9a52fbc1139f58b9db2881b25c",
                             "drafter": "/srv/glm53/drafter"}
    assert downloads(hub_log()) == [], "going back to the published checkpoint downloaded something"
    assert "No such file" in box(C, "ls /srv/glm53/.state/weights/model-ablit.hf-token 2>&1 || true"), (
        "a token file left by an interrupted run stayed after tensorfold_ablit went back to false")


def local_checkpoint_is_checked_and_never_modified():
    box(C, "rm -rf /data && mkdir -p /data && cp -a /srv/glm53/model /data/ckpt && cp -a /srv/glm53/model /data/broken"
           " && chmod u+w /data/broken && rm -f /data/broken/model-00002-of-00003.safetensors")
    listing = "cd /data/ckpt && find . -printf '%p %s %T@ %m\\n' | sort && sha256sum * "
    before = box(C, listing)
    hub_reset()
    rc, out = play([C], {"tensorfold_model_source": "local", "tensorfold_model_dir": "/data/ckpt",
                         "tensorfold_drafter": "none"})
    assert rc == 0, out[-3000:]
    assert box(C, listing) == before, "the local checkpoint changed"
    assert facts(out, C) == {"model": "/data/ckpt", "revision": "local", "drafter": ""}
    assert hub_log() == [], "a local source talked to the Hub"
    rc, out = play([C], {"tensorfold_model_source": "local", "tensorfold_model_dir": "/data/broken",
                         "tensorfold_drafter": "none"})
    assert rc != 0 and "[E_MODEL]" in out and "model-00002-of-00003.safetensors" in out, out[-3000:]


def check_mode_reports_the_size_and_writes_nothing():
    rc, out = play([B], {"tensorfold_ablit": True, "tensorfold_hf_token": TOKEN_OK}, check=True)
    assert rc == 0, out[-3000:]
    assert "would fetch 7 of 7 files, 6.0 MiB" in out, out[-3000:]  # every file of the stand-in checkpoint
    assert "No such file" in box(B, "ls /srv/glm53/model-ablit 2>&1 || true"), "check mode created the folder"


def ablit_in_place_serves_without_a_token():
    hub_reset()
    rc, out = play([C], {"tensorfold_ablit": True})
    assert rc == 0, "verified Ablit weights in place failed without a token: " + out[-3000:]
    assert facts(out, C)["model"] == "/srv/glm53/model-ablit"
    assert downloads(hub_log()) == [], "the weights in place were downloaded again"


def ours(name):
    """Our processes on a box: downloads and peer servers (their module payloads)."""
    return box(name, "pgrep -af 'AnsiballZ_hf_(snapshot|peer_serve)' || true").strip()


def killed_peer_copy_leaves_nothing_and_serves_no_stranger():
    """Kill the run while the seed serves the gated Ablit weights to a peer: a request without the
    run's secret gets 401 and no byte, the server listens on the peers' address only, the secret
    is in no process argument, and nothing of ours runs past the idle bound."""
    idle = 15
    extra = {"tensorfold_data_dir": "/srv/peerkill", "tensorfold_drafter": "none", "tensorfold_ablit": True,
             "tensorfold_hf_token": TOKEN_OK, "weights_fetch_strategy": "peer", "weights_fetch_idle_timeout": idle}
    hub_reset()
    proc = play([A, B], extra, background=True)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and "hf_peer_serve" not in ours(A):
        time.sleep(0.2)
    serving = "hf_peer_serve" in ours(A)
    killed = time.time()
    text = finish(proc)  # the operator's run dies
    assert serving, "the seed never served: %s" % text[-3000:]
    # The server's process can be seen a moment before it listens (port 18470 is 0x4826).
    listen_by = time.time() + 10
    while time.time() < listen_by and ":4826" not in box(A, "awk 'NR>1 && $4==\"0A\" {print $2}' /proc/net/tcp"):
        time.sleep(0.2)
    tree = "/api/models/%s/tree/57edefd2f5d9b371c8345883304d5af68b52fa24" % ABLIT_REPO
    shard = "/%s/resolve/57edefd2f5d9b371c8345883304d5af68b52fa24/model-00001-of-00003.safetensors" % ABLIT_REPO
    for path in (tree, shard):
        for auth in ("", "-H 'Authorization: Bearer hf_aHubTokenIsNotTheRunSecret'",
                     "-H 'Authorization: Bearer wrong-secret-0000000000'"):
            answer = box(B, "curl -s -o /tmp/peer-body -w '%%{http_code} %%{size_download}' %s http://%s:18470%s; echo"
                         % (auth, A, path)).split()
            assert answer[0] == "401", "a request without the run's secret got %s" % answer
            assert "safetensors" not in box(B, "cat /tmp/peer-body"), "a stranger got the listing"
    listen = box(A, "awk 'NR>1 && $4==\"0A\" {print $2}' /proc/net/tcp")
    assert ":4826" in listen and "00000000:4826" not in listen, "the server listens on every address: %s" % listen
    secret = box(A, "cat /srv/peerkill/.state/weights/peer.secret 2>/dev/null || true").strip()
    assert not secret or box(A, "stat -c %a /srv/peerkill/.state/weights/peer.secret").strip() == "600"
    for name in (A, B):
        args = box(name, "ps -eo args")
        assert not secret or secret not in args, "the secret shows in the process list of %s" % name
    left = {}
    while time.time() - killed < 2 * idle + 30:
        left = dict((name, ours(name)) for name in (A, B) if ours(name))
        if not left:
            break
        time.sleep(1)
    lived = time.time() - killed
    for name, text in left.items():  # only what this case's run started
        box(name, "pkill -9 -f 'AnsiballZ_hf_(snapshot|peer_serve)' || true")
    assert not left, "still running %.0f s after the kill: %s" % (lived, left)
    print("  nothing of ours ran %.0f s after the killed run (idle timeout %d s)" % (lived, idle))


def token_never_shows_up():
    for index, text in enumerate(OUTPUTS):
        assert CANARY not in text, "a token shows in the output of run %d" % index
    assert CANARY not in box(HUB, "cat /var/log/hub.jsonl")
    for name in BOXES:
        # Not even its own root-only file: the download removes it once it has read the token.
        found = box(name, "grep -rl %s /srv /root /tmp /var/log /etc 2>/dev/null || true" % CANARY).split()
        assert not found, "%s holds the token in %s" % (name, found)
        assert CANARY not in box(name, "ps -eo args"), "%s shows the token in a process argument" % name


def main():
    for func in (rerun_makes_no_hub_request_and_no_change, corrupted_shard_is_detected_and_repaired,
                 kill_mid_file_resumes_with_a_range_request, gated_401_and_403_have_their_messages,
                 ablit_with_a_token_then_back_with_no_download, local_checkpoint_is_checked_and_never_modified,
                 check_mode_reports_the_size_and_writes_nothing, ablit_in_place_serves_without_a_token,
                 killed_peer_copy_leaves_nothing_and_serves_no_stranger, token_never_shows_up):
        case(func)
    shutil.rmtree(WORK, ignore_errors=True)
    print("%d cases failed" % len(FAILED) if FAILED else "all cases passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
