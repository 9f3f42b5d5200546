#!/usr/bin/env python3
"""The fleet-speed benchmark: every row of the speed table measured in one run.

Each side of a ratio is a whole command timed the same way (a new process: `ansible-playbook`,
`ansible` ad hoc, `hf download`, `curl`): each side once untimed (a warm-up for both), then
BENCH_REPEAT times (default 3) in alternation, and its median is printed; with fewer than 3 runs a
row is a trial and its goal reads "trial", never "yes". Every command and every wait has a deadline
(BENCH_TIMEOUT seconds per command, default 1800); a run that must change nothing (a no-op
converge, the host checks) and shows a change in its recap fails the bench.
The table is printed with both figures and the ratio, and saved as JSON under reports/bench/.

Rows (name them to run only some; default all):
  weights      checkpoint download, every sha256 verified (hf_snapshot through `ansible`) / `hf download`
  peer         plain HTTP copy (`curl`) / peer copy (hf_snapshot through `ansible`), both from hf_peer's server
               (sendfile) on loopback; beside it Ansible's own start (`ansible localhost -m ping`), timed the same way
  host-checks  `site.yml --tags gpu_host_checks` (the settings pre-flight and the host checks; `--tags check`
               also runs the toolkit's checks, which need a Docker engine the light boxes lack):
               BENCH_CHECK_BOXES boxes (default 8) / 1 box; and 1 box absolute. On a real GPU host:
               BENCH_CHECK_LOCAL=1 (the boxes are names for this machine, local connection) with
               BENCH_CHECK_VARS=FILE (its cards' expectations) and BENCH_BIN (where ansible is)
  deploy       first deploy (`site.yml` on fresh boxes): BENCH_DEPLOY_BOXES (default 8) / 1
  noop         no-op converge: BENCH_BOXES (default 32) / 1; and 1 box absolute
  restart      `--tags restart` of one box beyond the engine stand-in's own start (with profile_tasks)
Sizes: BENCH_WEIGHTS_MIB (default 1024, the issue's size) for weights; BENCH_PEER_MIB (default 4096)
for peer. At 1 GiB Ansible's own start (0.6-0.7 s of wall time on a quiet machine) is most of what
curl takes for the whole copy; real checkpoints are hundreds of GiB, so the peer row copies 4 GiB
by default (three copies on disk, 12 GiB) and prints Ansible's start beside it; BENCH_PEER_MIB=1024
gives the 1 GiB figure. Every row but restart prints each side's median CPU seconds beside its
wall time: the command's own, and the whole machine's (the simulated boxes' side too).
BENCH_CONNECTION (default ssh): how the playbooks reach the simulated boxes, over SSH as a real fleet
is, or docker (`docker exec`, as the tests do; it costs this machine's two cores far more a command).
BENCH_PREFIX (default glm53-bench) starts the boxes' names: another one keeps a trial's boxes apart
from a running bench's. BENCH_KEEP=1 keeps the no-op fleet after the bench and takes it again
next time (its first converge is then a quick re-converge): 32 boxes take a quarter of an hour to
make and converge on this machine, which a second run of the table need not pay again. The
deploy row's boxes (fresh for every run) are named PREFIX-fd-gpuN, apart from a kept fleet.
"""

import datetime
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where ansible, ansible-playbook and hf are: beside this Python (the project's venv), or
# BENCH_BIN on a host that has them elsewhere (a lent GPU host with ansible-core installed by pip --target).
BIN = os.environ.get("BENCH_BIN") or os.path.dirname(sys.executable)
HUB = os.path.join(ROOT, "tests", "standins", "hub")
REPO = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold"
COMMIT = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
MIB = 1024 * 1024
# The boxes' names start with it: another prefix lets a trial run beside a bench that holds these.
PREFIX = os.environ.get("BENCH_PREFIX", "glm53-bench")


def setting(name, default):
    return int(os.environ.get(name, default))


REPEAT = setting("BENCH_REPEAT", 3)
TIMEOUT = setting("BENCH_TIMEOUT", 1800)
# The untimed set-up (making the boxes, the first converge of the no-op fleet) is not a figure: on a
# loaded machine 32 first deploys ran past 1800 s, so it has a deadline of its own.
SETUP_TIMEOUT = setting("BENCH_SETUP_TIMEOUT", 7200)
WEIGHTS_MIB = setting("BENCH_WEIGHTS_MIB", 1024)
PEER_MIB = setting("BENCH_PEER_MIB", 4096)
BOXES = setting("BENCH_BOXES", 32)
CHECK_BOXES = setting("BENCH_CHECK_BOXES", 8)
DEPLOY_BOXES = setting("BENCH_DEPLOY_BOXES", 8)
KEEP = os.environ.get("BENCH_KEEP") == "1"
# A file of settings (YAML or JSON) for the host checks' boxes: on a real GPU host, its cards' expectations.
CHECK_VARS = os.environ.get("BENCH_CHECK_VARS", "")
# BENCH_CHECK_LOCAL=1: the host checks' boxes are names for this machine (local connection, its own
# nvidia-smi and cores); for a real GPU host, where the boxes' side does not share the controller's cores.
CHECK_LOCAL = os.environ.get("BENCH_CHECK_LOCAL") == "1"
# How the playbooks reach the simulated boxes: ssh (the default), as a real fleet is reached, or
# docker (`docker exec` through this machine's engine, as the tests do). A `docker exec` costs this
# machine about five times the CPU of a command over a shared SSH connection (the CLI, dockerd,
# containerd and runc against ssh's client and the box's sshd), which a real fleet never pays.
CONNECTION = os.environ.get("BENCH_CONNECTION", "ssh")


class BenchError(Exception):
    pass


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def ansible_env(extra=None):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               MOLECULE_PROJECT_DIRECTORY=ROOT, ANSIBLE_RETRY_FILES_ENABLED="0")
    env.update(extra or {})
    return env


def run(cmd, env=None, timeout=None, cwd=ROOT):
    """Run a whole command with a deadline; return (seconds, output). A failure or a timeout raises."""
    began = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, start_new_session=True)
    try:
        out = proc.communicate(timeout=timeout or TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise BenchError("%s ran past its deadline of %d s" % (" ".join(cmd[:4]), timeout or TIMEOUT))
    seconds = time.monotonic() - began
    if proc.returncode != 0:
        raise BenchError("%s failed (rc %d):\n%s" % (" ".join(cmd[:6]), proc.returncode, out[-3000:]))
    return seconds, out


def cleanup(cmd):
    """A cleanup command (remove boxes, volumes, networks): its own deadline, failures ignored."""
    try:
        subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    except subprocess.TimeoutExpired:
        log("%s ran past its deadline of 300 s" % " ".join(cmd[:3]))


def recap_changes(out):
    """Hosts whose PLAY RECAP shows changed > 0."""
    return sorted(set(m.group(1) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=([1-9]\d*)", out, re.M)))


def side(label, runs):
    return {"label": label, "runs": [round(r, 2) for r in runs], "median": round(statistics.median(runs), 2)}


def judged(met, *sides):
    """A goal is met only on at least three runs a side; fewer is a trial, never a pass."""
    if any(len(one["runs"]) < 3 for one in sides if one):
        return "trial"
    return met


def ratio_row(name, a, b, goal, higher_is_better=False):
    """A row comparing side a (numerator) with side b; goal: the bound on a/b."""
    ratio = a["median"] / b["median"] if b["median"] else float("inf")
    met = ratio >= goal if higher_is_better else ratio <= goal
    return {"row": name, "a": a, "b": b, "ratio": round(ratio, 2),
            "goal": "%s %.2f" % (">=" if higher_is_better else "<=", goal), "met": judged(met, a, b)}


def absolute_row(name, a, goal_s):
    return {"row": name, "a": a, "b": None, "ratio": None, "goal": "< %g s" % goal_s,
            "met": judged(a["median"] < goal_s, a)}


def alternate(commands, settle=None):
    """Run each (label, thunk) once untimed (both sides find the caches warm), then REPEAT times,
    interleaved; thunk returns seconds. ``settle``, when given, runs before every run, untimed and
    outside the CPU counts. Returns {label: [s...]}."""
    for label, thunk in commands:
        if settle:
            settle()
        log("%s warm-up: %.2f s" % (label, thunk()))
    times = dict((label, []) for label, dummy in commands)
    for round_no in range(REPEAT):
        for label, thunk in commands:
            if settle:
                settle()
            seconds = thunk()
            times[label].append(seconds)
            log("%s run %d: %.2f s" % (label, round_no + 1, seconds))
    return times


# --- Hub emulator on loopback (weights, peer) ---------------------------------------------------
def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url, deadline_s=30):
    end = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError as exc:
            if time.monotonic() > end:
                raise BenchError("%s did not answer within %d s: %s" % (url, deadline_s, exc))
            time.sleep(0.1)


def wait_port(port, deadline_s=30, address="127.0.0.1"):
    end = time.monotonic() + deadline_s
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise BenchError("nothing listens on %s:%d after %d s" % (address, port, deadline_s))
            time.sleep(0.1)


class LocalHub:
    """The Hub emulator with a generated checkpoint of ``mib`` MiB in 128 MiB shards."""

    def __init__(self, work, mib):
        self.work = work
        shards = max(1, mib // 128)
        run([sys.executable, os.path.join(HUB, "make_repos.py"), work + "/repos", "--shards", str(shards),
             "--shard-mib", str(mib / shards)], timeout=600 + mib // 8)
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, os.path.join(HUB, "hub_emulator.py"), "--root", work + "/repos",
                                      "--bind", "127.0.0.1", "--port", str(self.port), "--cdn-port", str(free_port())],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = "http://127.0.0.1:%d" % self.port
        # The emulator reads every file's checksum before it answers: more time for more bytes.
        wait_http(self.url + "/_emulator/log", deadline_s=30 + mib // 32)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def machine_cpu_seconds():
    """CPU seconds the whole machine spent so far (every process: the simulated boxes' too)."""
    with open("/proc/stat") as handle:
        fields = handle.readline().split()[1:]
    ticks = os.sysconf("SC_CLK_TCK")
    # user nice system (idle iowait left out) irq softirq steal
    return sum(int(fields[i]) for i in (0, 1, 2, 5, 6, 7)) / float(ticks)


class CpuTimed:
    """Wraps a side's thunk and keeps the CPU seconds (user + system) of each run's command and
    all it waited for, and the whole machine's: on a loaded machine the wall time swings with the
    load, the CPU a command needs much less. The command's own (for a playbook: the controller,
    its workers and their docker clients) and the machine's (the simulated boxes' side too, which a
    real fleet runs on the boxes' own CPUs) are kept apart."""

    def __init__(self, thunk):
        self.thunk = thunk
        self.cpu = []
        self.machine = []

    def __call__(self):
        before, machine_before = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu_seconds()
        seconds = self.thunk()
        after, machine_after = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu_seconds()
        self.cpu.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2))
        self.machine.append(round(machine_after - machine_before, 2))
        log("  cpu %.2f s (machine %.2f s)" % (self.cpu[-1], self.machine[-1]))
        return seconds


def with_cpu(one, timed, warm_up=True):
    """A side with the median CPU seconds of its timed runs (less the first, a warm-up, if it had one)."""
    cpu, machine = (timed.cpu[1:], timed.machine[1:]) if warm_up else (timed.cpu, timed.machine)
    one["cpu"], one["machine_cpu"] = cpu, machine
    one["cpu_median"] = round(statistics.median(cpu), 2) if cpu else None
    one["machine_cpu_median"] = round(statistics.median(machine), 2) if machine else None
    return one


def hf_snapshot_adhoc(dest, endpoint, state_dir=None, token_file=None, listing=None):
    args = {"repo_id": REPO, "revision": COMMIT, "local_dir": dest + "/model", "endpoint": endpoint}
    if state_dir:
        args["state_dir"] = state_dir
    if token_file:
        args["token_file"] = token_file
    if listing:
        args["listing"] = listing
    seconds, out = run([os.path.join(BIN, "ansible"), "localhost", "-o", "-m", "glm53.tensorfold.hf_snapshot",
                        "-a", json.dumps(args), "-e", "ansible_python_interpreter=" + sys.executable],
                       env=ansible_env())
    if '"verified": true' not in out:
        raise BenchError("hf_snapshot did not verify the snapshot:\n" + out[-2000:])
    return seconds


def settle_disk(*copies):
    """Before each run of a copy row: remove both sides' copies and wait until the disk has written
    back what the runs before wrote (`sync`), so that no run starts while another's 1-4 GiB are
    still being written back into the same disk (which decided the peer row's ratio before).
    Then have the kernel compact free memory: the 4 GiB a run freed leave it in a state that made
    the next run's writes into the page cache about twice as slow in the kernel (on this machine's
    6.18 kernel, the peer copy right after `curl`: 9.2 s against 6.2 s, its system time 10.4 s against
    5.5 s); the row ran the peer copy after `curl` every time. Skipped where /proc/sys is read-only."""
    for path in copies:
        shutil.rmtree(path, ignore_errors=True)
    os.sync()
    try:
        with open("/proc/sys/vm/compact_memory", "w") as handle:
            handle.write("1")
    except (IOError, OSError):
        pass


def bench_weights(work):
    hub = LocalHub(work, WEIGHTS_MIB)
    try:
        env = dict(os.environ, HF_ENDPOINT=hub.url, HF_HOME=work + "/hf-home", HF_HUB_DISABLE_PROGRESS_BARS="1",
                   HF_HUB_DISABLE_TELEMETRY="1")

        def plain():
            shutil.rmtree(work + "/hf", ignore_errors=True)
            return run([os.path.join(BIN, "hf"), "download", REPO, "--revision", COMMIT, "--local-dir", work + "/hf"],
                       env=env)[0]

        def ours():
            shutil.rmtree(work + "/ours", ignore_errors=True)
            return hf_snapshot_adhoc(work + "/ours", hub.url)

        plain, ours = CpuTimed(plain), CpuTimed(ours)
        times = alternate([("hf download", plain), ("hf_snapshot", ours)],
                          settle=lambda: settle_disk(work + "/hf", work + "/ours"))
    finally:
        hub.close()
    return [ratio_row("checkpoint download %d MiB: hf download / hf_snapshot (every sha256 verified); speed ratio"
                      % WEIGHTS_MIB, with_cpu(side("hf download", times["hf download"]), plain),
                      with_cpu(side("hf_snapshot via ansible", times["hf_snapshot"]), ours), 0.95,
                      higher_is_better=True)]


def bench_peer(work):
    """Both sides fetch every file from hf_peer's server (sendfile, the run's secret required):
    `python3 -m http.server` copies each file through Python (read, then send) on the same two
    cores, which would slow the plain side by the server's CPU, not the client's. `curl` reads the
    secret from a 0600 header file, so it is in no process's arguments."""
    hub = LocalHub(work, PEER_MIB)
    seed = work + "/seed"
    try:
        hf_snapshot_adhoc(seed, hub.url, state_dir=seed + "/.state")
    finally:
        hub.close()
    shutil.rmtree(work + "/repos", ignore_errors=True)  # the emulator's copy: not needed any more
    peer_port = free_port()
    collections = os.path.join(ROOT, ".cache", "collections")
    # The run's secret, as the weights_fetch role hands it over: a 0600 file on both sides.
    secret = os.urandom(24).hex()
    secret_file, header_file = work + "/peer.secret", work + "/peer.header"
    for path, text in ((secret_file, secret + "\n"), (header_file, "Authorization: Bearer %s\n" % secret)):
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write(text)
    serve = ("import sys; sys.path.insert(0, %r); from ansible_collections.glm53.tensorfold.plugins.module_utils "
             "import hf_peer; hf_peer.serve([{'repo_id': %r, 'revision': %r, 'local_dir': %r, 'state_dir': %r}], "
             "'127.0.0.1', %d, %r, 3600, hf_peer.read_secret(%r))"
             % (collections, REPO, COMMIT, seed + "/model", seed + "/.state", peer_port, work + "/stop-peer",
                secret_file))
    server = subprocess.Popen([sys.executable, "-c", serve], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        peer = "http://127.0.0.1:%d" % peer_port
        wait_port(peer_port)
        names = sorted(os.listdir(seed + "/model"))

        def plain():
            shutil.rmtree(work + "/plain", ignore_errors=True)
            os.makedirs(work + "/plain")
            cmd = [shutil.which("curl") or "curl", "-sSf", "-H", "@" + header_file]
            for name in names:
                cmd += ["-o", work + "/plain/" + name, "%s/%s/resolve/%s/%s" % (peer, REPO, COMMIT, name)]
            return run(cmd)[0]

        # The seed's listing, handed over as weights_fetch hands it to its peers: a peer asks the
        # seed for nothing but the files.
        with open("%s/.state/listing-%s.json" % (seed, COMMIT)) as handle:
            listing = json.load(handle)

        def ours():
            shutil.rmtree(work + "/copy", ignore_errors=True)
            return hf_snapshot_adhoc(work + "/copy", peer, token_file=secret_file, listing=listing)

        def ansible_start():
            return run([os.path.join(BIN, "ansible"), "localhost", "-o", "-m", "ansible.builtin.ping",
                        "-e", "ansible_python_interpreter=" + sys.executable], env=ansible_env())[0]

        plain, ours, start = CpuTimed(plain), CpuTimed(ours), CpuTimed(ansible_start)
        times = alternate([("plain HTTP copy", plain), ("peer copy", ours), ("ansible start", start)],
                          settle=lambda: settle_disk(work + "/plain", work + "/copy"))
    finally:
        open(work + "/stop-peer", "w").close()
        server.terminate()
        server.wait(timeout=30)
    copy = ratio_row("weights copy between hosts %d MiB: plain HTTP (curl) / peer copy (hf_snapshot via ansible), "
                     "both from hf_peer; speed ratio" % PEER_MIB,
                     with_cpu(side("plain HTTP copy", times["plain HTTP copy"]), plain),
                     with_cpu(side("peer copy via ansible", times["peer copy"]), ours), 0.9, higher_is_better=True)
    fixed = with_cpu(side("ansible localhost -m ping", times["ansible start"]), start)
    # What the peer copy pays before its first byte, whatever the size: shown beside the row, not
    # taken off it (the goal is on whole commands).
    copy["ansible_start"] = fixed
    return [copy, {"row": "  beside it: Ansible's own start (a whole `ansible` ad hoc command), part of the peer "
                          "copy's time at any size", "a": fixed, "b": None, "ratio": None, "goal": "-", "met": "-"}]


# --- simulated boxes ------------------------------------------------------------------------------
# Run in a box by BoxSsh.serve: the bench's key (copied in beforehand) authorised for root, host
# keys made once, sshd started unless it runs.
SSHD_START = """set -e
if [ ! -x /usr/sbin/sshd ]; then
  echo "no sshd in this box: remove the bench's boxes and make them again from the current image" >&2; exit 3
fi
mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh
mv /tmp/glm53-bench-key.pub /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys
ssh-keygen -A >/dev/null
pgrep -x sshd >/dev/null || /usr/sbin/sshd
"""


def box_addresses(names):
    """{box: its address on its Docker network} (the first, where a box has several)."""
    out = run(["docker", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"]
              + list(names))[1]
    return dict((name, line.split()[0]) for name, line in zip(names, out.strip().split("\n")))


class BoxSsh:
    """The bench's boxes reached over SSH, as a real fleet is: a key of the bench's own, sshd in each
    box (the boxes' image has it), and the checkout's ansible.cfg for the rest (pipelining, one
    shared connection per box kept 30 minutes: both sides of a row find theirs open after the
    warm-up). A box's address changes whenever it is made, so host keys are neither checked nor kept."""

    def __init__(self, work):
        self.key = os.path.join(work, "bench-ssh-key")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "glm53-bench", "-f", self.key])

    def serve(self, names):
        """Start sshd with the bench's key on each box; {name: its host vars}."""
        found = {}
        for name, address in box_addresses(names).items():
            run(["docker", "cp", self.key + ".pub", name + ":/tmp/glm53-bench-key.pub"])
            run(["docker", "exec", name, "sh", "-c", SSHD_START])
            wait_port(22, address=address)
            found[name] = {"ansible_connection": "ssh", "ansible_host": address, "ansible_user": "root",
                           "ansible_ssh_private_key_file": self.key,
                           "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
                                                      " -o LogLevel=ERROR"}
        return found


class LightBoxes:
    """Boxes for the host checks: the base image, the stand-in nvidia-smi behind a memo of its
    answers, no Docker engine of their own (the Docker checks are off), reached over SSH
    (BENCH_CONNECTION). With BENCH_CHECK_LOCAL=1, names for this machine instead (local connection:
    its own nvidia-smi, GPUs and cores)."""

    def __init__(self, count, work):
        self.names = ["%s-hc%d" % (PREFIX, n + 1) for n in range(count)]
        self.inventory = work + "/light.yml"
        self.made = []
        hosts = dict((name, {}) for name in self.names)
        settings = {"ansible_python_interpreter": sys.executable if CHECK_LOCAL else "/usr/bin/python3",
                    "ansible_pipelining": True, "gpu_host_checks_docker": False, "gpu_host_checks_fail": False,
                    "gpu_host_checks_disk_checkpoint_gib": 1, "gpu_host_checks_disk_drafter_gib": 1,
                    "gpu_host_checks_disk_image_gib": 1, "gpu_host_checks_min_host_memory_gib": 0.5}
        settings["ansible_connection"] = "local" if CHECK_LOCAL else "community.docker.docker"
        if CHECK_VARS:
            with open(CHECK_VARS) as handle:
                settings.update(yaml_or_json(handle.read()))
        if CHECK_LOCAL:
            self.write(hosts, settings)
            return
        with open(work + "/profile.json", "w") as handle:
            json.dump({"count": 2, "memory_used_mib": 2, "p2p": "OK"}, handle)
        for name in self.names:
            run(["docker", "run", "-d", "--name", name, "glm53-test/debian12:latest", "sleep", "infinity"], timeout=120)
            self.made.append(name)
            # nvidia-smi answers each distinct command once with the stand-in, then from its record
            # (tests/standins/nvidia-smi-memo): the box's profile never changes.
            run(["docker", "exec", name, "mkdir", "-p", "/etc/glm53-sim", "/usr/lib/glm53-sim"])
            run(["docker", "cp", os.path.join(ROOT, "tests/standins/nvidia-smi"), name + ":/usr/lib/glm53-sim/nvidia-smi"])
            run(["docker", "cp", os.path.join(ROOT, "tests/standins/nvidia-smi-memo"), name + ":/usr/bin/nvidia-smi"])
            run(["docker", "cp", work + "/profile.json", name + ":/etc/glm53-sim/gpu-profile.json"])
        if CONNECTION == "ssh":
            for name, host_vars in BoxSsh(work).serve(self.names).items():
                hosts[name].update(host_vars)
        self.write(hosts, settings)

    def write(self, hosts, settings):
        with open(self.inventory, "w") as handle:
            json.dump({"gpu_hosts": {"hosts": hosts, "vars": settings}}, handle)

    def close(self):
        if self.made:
            cleanup(["docker", "rm", "-f"] + self.made)


def yaml_or_json(text):
    """A settings file's mapping: JSON, or YAML where PyYAML is there (ansible-core needs it anyway)."""
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # pylint: disable=import-outside-toplevel
        return yaml.safe_load(text) or {}


def playbook(inventory, *args, env=None, timeout=None):
    return run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, os.path.join(ROOT, "playbooks", "site.yml")]
               + list(args), env=ansible_env(env), timeout=timeout)


def unchanged(seconds_out, what):
    """The seconds of a run that must change nothing; a change fails the bench."""
    seconds, out = seconds_out
    changed = recap_changes(out)
    if changed:
        raise BenchError("%s changed something on %s:\n%s" % (what, ", ".join(changed), out[-3000:]))
    return seconds


def bench_host_checks(work):
    boxes = LightBoxes(CHECK_BOXES, work)
    try:
        def one():
            return unchanged(playbook(boxes.inventory, "--tags", "gpu_host_checks", "-l", boxes.names[0]),
                             "the host checks")

        def many():
            return unchanged(playbook(boxes.inventory, "--tags", "gpu_host_checks"), "the host checks")

        one, many = CpuTimed(one), CpuTimed(many)
        times = alternate([("1 box", one), ("%d boxes" % CHECK_BOXES, many)])
    finally:
        boxes.close()
    a = with_cpu(side("%d boxes" % CHECK_BOXES, times["%d boxes" % CHECK_BOXES]), many)
    b = with_cpu(side("1 box", times["1 box"]), one)
    return [ratio_row("host checks, %d boxes / 1 box" % CHECK_BOXES, a, b, 1.5),
            absolute_row("host checks of 1 box", b, 5)]


class Fleet:
    """Full simulated GPU hosts (tests/demo/boxes.yml): each runs its own Docker engine (the engine
    container runs inside the box), the stand-in nvidia-smi and runtime, the Hub emulator beside;
    made through Docker, then reached over SSH (BENCH_CONNECTION) by every playbook run after."""

    def __init__(self, count, work, tag, keep=False, prefix=PREFIX):
        self.prefix = prefix
        self.names = ["%s-gpu%d" % (prefix, n + 1) for n in range(count)]
        self.dir = os.path.join(work, "fleet-" + tag)
        os.makedirs(self.dir)
        os.symlink(os.path.join(ROOT, "inventories", "demo", "group_vars"), os.path.join(self.dir, "group_vars"))
        self.inventory = os.path.join(self.dir, "hosts.yml")
        hosts = dict((name, {"sim_gpu_profile": {"count": 2, "memory_used_mib": 2, "p2p": "OK"}})
                     for name in self.names)
        with open(self.inventory, "w") as handle:
            json.dump({"gpu_hosts": {"hosts": hosts}}, handle)
        if keep and self.running():
            log("taking the %d boxes kept from an earlier bench (BENCH_KEEP)" % count)
        else:
            self.destroy()
            log("making %d boxes" % count)
            run([os.path.join(BIN, "ansible-playbook"), "-i", self.inventory, os.path.join(ROOT, "tests/demo/boxes.yml"),
                 "-e", "sim_prefix=" + prefix], env=ansible_env(), timeout=SETUP_TIMEOUT)
        if CONNECTION == "ssh":
            for name, host_vars in BoxSsh(self.dir).serve(self.names).items():
                hosts[name].update(host_vars)
        self.write_literal_settings(hosts)

    def write_literal_settings(self, hosts):
        """The demo's group_vars compute a few settings with a lookup at every read: each box's bench
        URL from `docker inspect`, the stand-ins' pins from a file. A real inventory holds such values
        as they are, so the bench's does too: otherwise every box's settings check would pay for a
        `docker inspect` and three file reads that no real fleet runs."""
        pins = {}
        with open(os.path.join(ROOT, ".cache", "glm53-sim", "standins", "pins.env")) as handle:
            for line in handle:
                key, _, value = line.strip().partition("=")
                pins[key] = value
        for name, address in box_addresses(self.names).items():
            hosts[name].update(tensorfold_image_engine_commit=pins["ENGINE_COMMIT"],
                               tensorfold_image_patch_series_commit=pins["SERIES_COMMIT"],
                               tensorfold_image_zig_sha256=pins["ZIG_SHA256"],
                               fleet_bench_url="http://%s:{{ tensorfold_port }}" % address)
        with open(self.inventory, "w") as handle:
            json.dump({"gpu_hosts": {"hosts": hosts}}, handle)

    def running(self):
        found = subprocess.run(["docker", "inspect", "--format", "{{.State.Running}}"] + self.names + [self.prefix + "-hub"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
        return found.returncode == 0 and set(found.stdout.split()) == {"true"}

    def destroy(self):
        cleanup(["docker", "rm", "-f"] + self.names + [self.prefix + "-hub"])
        cleanup(["docker", "volume", "rm"] + ["%s-docker" % n for n in self.names])
        cleanup(["docker", "network", "rm", self.prefix + "-net"])


def bench_deploy(work):
    labels = (("1 box", 1), ("%d boxes" % DEPLOY_BOXES, DEPLOY_BOXES))
    times = dict((label, []) for label, unused in labels)
    timed = dict((label, CpuTimed(None)) for label, unused in labels)
    for round_no in range(REPEAT):
        for label, count in labels:
            # Fresh boxes every run, named apart from the no-op fleet (which BENCH_KEEP may keep).
            fleet = Fleet(count, work, "deploy-%d-%d" % (round_no, count), prefix=PREFIX + "-fd")
            try:
                timed[label].thunk = lambda: playbook(fleet.inventory)[0]
                seconds = timed[label]()
            finally:
                fleet.destroy()
            times[label].append(seconds)
            log("first deploy %s run %d: %.1f s" % (label, round_no + 1, seconds))
    many = "%d boxes" % DEPLOY_BOXES
    # No warm-up here (every run needs fresh boxes), so every run's CPU counts.
    a = with_cpu(side(many, times[many]), timed[many], warm_up=False)
    b = with_cpu(side("1 box", times["1 box"]), timed["1 box"], warm_up=False)
    return [ratio_row("first deploy, %d boxes / 1 box" % DEPLOY_BOXES, a, b, 1.5)]


def engine_start_seconds(box):
    out = run(["docker", "exec", box, "cat", "/srv/glm53/logs/current/rank0.log"])[1]
    found = re.findall(r"loaded in ([0-9.]+)s", out)
    if not found:
        raise BenchError("no 'loaded in N s' line in %s's rank0.log" % box)
    return float(found[-1])


def bench_converged(work, rows_wanted):
    fleet = Fleet(BOXES, work, "noop", keep=KEEP)
    rows = []
    try:
        log("first converge of %d boxes (untimed; deadline BENCH_SETUP_TIMEOUT)" % BOXES)
        seconds = playbook(fleet.inventory, timeout=SETUP_TIMEOUT)[0]
        log("first converge of %d boxes took %.0f s" % (BOXES, seconds))

        def noop(limit):
            def thunk():
                args = ["-l", limit] if limit else []
                return unchanged(playbook(fleet.inventory, *args), "a no-op converge")
            return thunk

        if "noop" in rows_wanted:
            one, many = CpuTimed(noop(fleet.names[0])), CpuTimed(noop(None))
            times = alternate([("1 box", one), ("%d boxes" % BOXES, many)])
            a = with_cpu(side("%d boxes" % BOXES, times["%d boxes" % BOXES]), many)
            b = with_cpu(side("1 box", times["1 box"]), one)
            rows += [ratio_row("no-op converge, %d boxes / 1 box" % BOXES, a, b, 2.5),
                     absolute_row("no-op converge of 1 box", b, 10)]
        if "restart" in rows_wanted:
            overhead = []
            for round_no in range(REPEAT):
                seconds, out = playbook(fleet.inventory, "--tags", "restart", "-l", fleet.names[0],
                                        env={"ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks"})
                engine = engine_start_seconds(fleet.names[0])
                overhead.append(seconds - engine)
                log("restart run %d: %.1f s, engine %.1f s" % (round_no + 1, seconds, engine))
                with open(os.path.join(REPORTS, "restart-profile.txt"), "w") as handle:
                    handle.write("restart run %d: %.1f s, engine stand-in start %.1f s\n" % (round_no + 1, seconds, engine))
                    handle.write(out[out.rfind("PLAY RECAP"):])
            rows.append(absolute_row("--tags restart of 1 box beyond the engine's own start",
                                     side("restart - engine start", overhead), 5))
    finally:
        if not KEEP:
            fleet.destroy()
    return rows


REPORTS = os.path.join(ROOT, "reports", "bench")
ROWS = ("weights", "peer", "host-checks", "deploy", "noop", "restart")


def table(rows):
    lines = ["| row | side A (median of runs) | side B (median of runs) | ratio A/B | goal | met |", "|---|---|---|---|---|---|"]
    def figure(one):
        cpu = " (cpu %.2f s" % one["cpu_median"] if one.get("cpu_median") is not None else ""
        if cpu:
            machine = one.get("machine_cpu_median")
            cpu += (", machine %.2f s)" % machine) if machine is not None else ")"
        return "%s %.2f s %s%s" % (one["label"], one["median"], one["runs"], cpu)

    for row in rows:
        b = row["b"]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            row["row"], figure(row["a"]), figure(b) if b else "-",
            "%.2f" % row["ratio"] if row["ratio"] is not None else "-", row["goal"],
            {True: "yes", False: "NO"}.get(row["met"], row["met"])))
    return "\n".join(lines)


def main(argv):
    wanted = argv or list(ROWS)
    unknown = [w for w in wanted if w not in ROWS]
    if unknown:
        print("unknown row(s) %s (known: %s)" % (", ".join(unknown), ", ".join(ROWS)), file=sys.stderr)
        return 2
    if CONNECTION not in ("ssh", "docker"):
        print("BENCH_CONNECTION is %r: ssh or docker" % CONNECTION, file=sys.stderr)
        return 2
    os.makedirs(REPORTS, exist_ok=True)
    # A SIGTERM (a deadline above this one, an operator) still runs the finally clauses that
    # remove the boxes, and the rows measured so far are saved.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    work = tempfile.mkdtemp(prefix="glm53-bench-")
    path = os.path.join(REPORTS, "bench-%s.json" % time.strftime("%Y%m%dT%H%M%S"))
    rows, failed = [], None
    began = time.time()

    def save():
        report = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "seconds": round(time.time() - began),
                  "settings": {"repeat": REPEAT, "connection": CONNECTION, "boxes": BOXES, "check_boxes": CHECK_BOXES,
                               "deploy_boxes": DEPLOY_BOXES, "weights_mib": WEIGHTS_MIB, "peer_mib": PEER_MIB,
                               "timeout": TIMEOUT},
                  "load_average": os.getloadavg(), "rows": rows, "failed": failed}
        with open(path, "w") as handle:
            json.dump(report, handle, indent=1)

    try:
        for name, func in (("weights", bench_weights), ("peer", bench_peer), ("host-checks", bench_host_checks),
                           ("deploy", bench_deploy)):
            if name in wanted:
                log("row %s" % name)
                sub = os.path.join(work, name)
                os.makedirs(sub)
                rows += func(sub)
                save()
        if "noop" in wanted or "restart" in wanted:
            log("rows noop/restart")
            sub = os.path.join(work, "converged")
            os.makedirs(sub)
            rows += bench_converged(sub, wanted)
    except BenchError as err:
        failed = str(err)
    except SystemExit:
        failed = "stopped by SIGTERM"
    finally:
        shutil.rmtree(work, ignore_errors=True)
        save()
    print(table(rows))
    print("saved %s" % os.path.relpath(path, ROOT))
    if failed:
        print("BENCH FAILED: %s" % failed, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
