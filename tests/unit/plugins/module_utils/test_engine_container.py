# -*- coding: utf-8 -*-
"""engine_container's flow against a scripted docker CLI: the lock's life, the context retries
(four starts at most), what a refused start says, what a restart does on a host that never
served, the record, and the drain count."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_container as ec

REFUSAL = ("tensorfold: the CUDA memory budget fits no stream: one at a 1048576-token window takes 8.00 GiB, "
           "and 5.30 GiB is left after the model's 84.50 GiB and the 4.0 GiB reserve; lower --context, "
           "or free device memory")


def startup(streams, window):
    return ("CUDA sm_120 device 0 (card): model 84.50 GiB; %d streams at once, 0.50 GiB each at a %d-token window, "
            "of 5.3 GiB left after a 4.0 GiB reserve; prompts in 2048-row chunks" % (streams, window))


class FakeDocker(object):
    """Plays the docker CLI: `run -d` writes rank logs into the mounted /logs folder as the engine
    would for the window in runner.sh (``serve(window) -> (running, log0, log1)``)."""

    def __init__(self, serve, images=("img:tag",)):
        self.serve = serve
        self.images = set(images)
        self.containers = {}
        self.calls = []
        # What the engine answers the argument check (accepted unless a test says otherwise).
        self.argument_check = (1, "tensorfold: /nonexistent/argument-check is neither a directory nor a Hugging Face "
                                  "repo id", "")
        # What `docker run -d` answers instead of starting the container, (rc, out, err); None starts it.
        self.run_refusal = None

    def __call__(self, argv):
        self.calls.append(argv)
        args = argv[1:]
        if args[:2] == ["container", "inspect"]:
            found = self.containers.get(args[2])
            return (0, json.dumps([found]), "") if found else (1, "", "no such container")
        if args[:2] == ["image", "inspect"]:
            return (0, "sha256:x", "") if args[-1] in self.images else (1, "", "no such image")
        if args[0] == "rm":
            self.containers.pop(args[-1], None)
            return 0, "", ""
        if args[0] == "run" and "-d" not in args:
            return self.argument_check
        if args[0] == "run" and self.run_refusal:
            return self.run_refusal
        if args[0] == "run":
            name = args[args.index("--name") + 1]
            if name in self.containers:  # as docker answers a name in use
                return 125, "", 'docker: Error response from daemon: Conflict. The container name "/%s" is already in use' % name
            logs = [a.split("source=")[1].split(",")[0] for a in args if "target=/logs" in a][0]
            text = open(os.path.join(logs, "runner.sh")).read()
            window = int(text.split("--context\n  ")[1].split("\n")[0])
            running, log0, log1 = self.serve(window)
            for rank, log in ((0, log0), (1, log1)):
                with open(os.path.join(logs, "rank%d.log" % rank), "w") as out:
                    out.write(log + "\n")
            labels = dict(a.split("=", 1) for a in [args[i + 1] for i, x in enumerate(args) if x == "--label"])
            self.containers[name] = {"Config": {"Labels": labels, "Image": args[-3]},
                                     "State": {"Running": running, "Status": "running" if running else "exited",
                                               "ExitCode": 0 if running else 1},
                                     "HostConfig": {"RestartPolicy": {"Name": "no", "MaximumRetryCount": 0}},
                                     "RestartCount": 0}
            return 0, "id", ""
        if args[0] == "update":
            policy = args[2]
            name, _sep, count = policy.partition(":")
            self.containers[args[3]]["HostConfig"]["RestartPolicy"] = {"Name": name, "MaximumRetryCount": int(count or 0)}
            return 0, "", ""
        if args[0] == "stop":
            self.containers[args[-1]]["State"].update(Running=False, Status="exited", ExitCode=143)
            return 0, "", ""
        raise AssertionError("unexpected docker call %r" % argv)


def params(tmp_path, **changes):
    p = {"host": "h1", "name": "glm53-zig", "label": "glm53.tensorfold.rank_container", "image": "img:tag",
         "settings": {"tensorfold_parallel": "4", "tensorfold_port": 8020}, "engine_args": [], "context": "auto",
         "auto_context": 1048576, "fit_fields": {"gpu_name": "card"}, "page_rows": 512, "parallel": "4",
         "api_key": "", "data_dir": str(tmp_path), "model_dir": str(tmp_path / "model"), "drafter_dir": "",
         "cache_dir": str(tmp_path / ".cache"), "gpu_indices": [0, 1], "gpus": None, "gpu_requests": False,
         "env": {}, "ulimits": [], "api_host": "127.0.0.1", "port": 8020, "wait_timeout": 5, "lock_wait": 0,
         "log_tail_lines": 5, "stop_grace": 1, "restart_policy": "on-failure:3"}
    p.update(changes)
    return p


def engine(tmp_path, docker, read_gpus=None, **changes):
    clock = {"t": 0.0}

    def sleep(seconds):
        clock["t"] += seconds

    def http(path, timeout=5, key=None, body=None):
        info = docker.containers.get("glm53-zig")
        up = info and info["State"]["Running"]
        if path == "/v1/models":
            return 200, '{"object": "list", "data": []}'
        return (200, '{"status": "ok"}') if up else (None, "refused")

    return ec.EngineContainer(params(tmp_path, **changes), ec.Docker(docker), sleep=sleep,
                              clock=lambda: clock["t"], http=http, read_gpus=read_gpus)


def fitting(window):
    if window > 173056:
        return False, REFUSAL, "rank 1: rank 0 closed the control link; exiting"
    return True, startup(4, window), "rank 1: settings agreed, NCCL joined"


def test_auto_start_is_refused_once_then_serves_the_window_that_fits_and_records_it(tmp_path):
    docker = FakeDocker(fitting)
    result = engine(tmp_path, docker).run("started")
    assert result["status"] == "running" and result["starts"] == 2 and result["context"] == 173056
    assert result["streams"] == 4 and result["warnings"] == []
    assert open(str(tmp_path / ".state" / "context-fit.tsv")).read().count("\t173056\t") == 1
    record = json.load(open(str(tmp_path / ".state" / "engine.json")))
    assert record["image"] == "img:tag" and record["context"] == 173056 and record["device_ids"] == ["0", "1"]
    assert docker.containers["glm53-zig"]["HostConfig"]["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 3}
    # A second run with the same settings starts nothing, from the cache.
    again = engine(tmp_path, docker)
    runs = len([c for c in docker.calls if c[1] == "run"])
    assert again.run("started")["status"] == "running" and not again.changed
    assert len([c for c in docker.calls if c[1] == "run"]) == runs


def test_a_retry_refused_again_fails_with_e_fit_quoting_both_refusals(tmp_path):
    second = REFUSAL.replace("one at a 1048576-token window takes 8.00", "one at a 173056-token window takes 1.50")
    docker = FakeDocker(lambda w: (False, REFUSAL if w == 1048576 else second, ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker).run("started")
    assert failed.value.code == "E_FIT"
    assert "1048576-token window takes 8.00" in failed.value.message and "173056-token window" in failed.value.message
    assert failed.value.message.startswith("[E_FIT] h1: the engine refused to start")


def test_fewer_streams_than_asked_warn_w_streams(tmp_path):
    docker = FakeDocker(lambda w: (True, startup(1, w), ""))
    result = engine(tmp_path, docker, context="65536").run("started")
    assert [w["code"] for w in result["warnings"]] == ["W_STREAMS"]
    assert "1 streams came up at a 65536-token window, 4 were asked" in result["warnings"][0]["message"]


def test_restart_on_a_host_that_never_served_says_so_and_does_not_fail(tmp_path):
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, image="")
    result = box.run("restarted")
    assert result["status"] == "not_deployed" and not box.changed
    assert result["endpoint"] == ""  # nothing serves there; the fleet report shows no URL
    assert "nothing to restart" in box.messages[0] and "full site playbook" in box.messages[0]
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, image="").run("started")
    assert failed.value.code == "E_IMAGE"


def test_restart_without_a_container_takes_the_recorded_image(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536").run("started")
    docker.containers.clear()  # e.g. a killed restart removed it before starting the new one
    result = engine(tmp_path, docker, image="", context="65536").run("restarted")
    assert result["status"] == "running"
    assert docker.containers["glm53-zig"]["Config"]["Image"] == "img:tag"


def argument_checks(docker):
    return [c for c in docker.calls if c[1] == "run" and "-d" not in c]


def test_a_restart_with_the_same_flags_and_image_asks_the_engine_to_check_them_only_once(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536").run("started")
    assert len(argument_checks(docker)) == 1
    result = engine(tmp_path, docker, context="65536").run("restarted")
    assert result["status"] == "running" and result["starts"] == 1
    assert len(argument_checks(docker)) == 1  # the container it replaced ran these very flags
    # Other flags (another window), or no container to compare with: checked again before the stop.
    engine(tmp_path, docker, context="32768").run("restarted")
    assert len(argument_checks(docker)) == 2
    docker.containers.clear()
    engine(tmp_path, docker, context="32768").run("restarted")
    assert len(argument_checks(docker)) == 3


@pytest.mark.parametrize("answer,code,quoted", [
    # Exit 2: the engine printed its usage for a wrong flag.
    ((2, "usage: tensorfold-native serve MODEL [flags]\nunknown flag --foo", ""), "E_SETTINGS",
     "(exit 2): usage: tensorfold-native serve MODEL [flags] | unknown flag --foo. Flags: --tp 2"),
    # Exit 1 with another problem than the missing model: the engine could not load, the flags are not at fault.
    ((1, "tensorfold: no CUDA kernel set for sm_120 at /opt/tensorfold/kernels\n", ""), "E_IMAGE",
     "the engine in img:tag could not start for the argument check (exit 1): tensorfold: no CUDA kernel set for "
     "sm_120 at /opt/tensorfold/kernels."),
    # The engine died by a signal (139, SIGSEGV): its own status, not docker's.
    ((139, "rank 0: loading shard 1/40\n", ""), "E_IMAGE",
     "the engine in img:tag could not start for the argument check (exit 139): rank 0: loading shard 1/40."),
    # Docker's own statuses: 125 the daemon, 126/127 a command it could not run.
    ((125, "", "docker: Error response from daemon: invalid mount config for type \"bind\": bind source path does "
               "not exist: /data/.state/argument-check/api-key."), "E_START",
     "docker could not run the argument check (exit 125): docker: Error response from daemon: invalid mount config"),
    ((127, "", 'docker: Error response from daemon: failed to create task for container: exec: "/bin/bash": '
               "stat /bin/bash: no such file or directory"), "E_START",
     "docker could not run the argument check (exit 127): docker: Error response"),
])
def test_the_argument_check_tells_a_flag_error_from_a_load_failure_and_from_docker(tmp_path, answer, code, quoted):
    docker = FakeDocker(fitting)
    docker.argument_check = answer
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker).run("started")
    assert failed.value.code == code and quoted in failed.value.message
    assert ("Fix the setting behind the named flag" in failed.value.message) == (code == "E_SETTINGS")
    assert "nothing running was touched" in failed.value.message and starts(docker) == 0


def test_the_argument_check_accepts_exit_1_naming_the_missing_model(tmp_path):
    docker = FakeDocker(fitting)
    docker.argument_check = (1, "warning: non-loopback server has no API key; requests are open\n",
                             "tensorfold: /nonexistent/argument-check is neither a directory nor a Hugging Face repo id\n")
    assert engine(tmp_path, docker, context="65536").run("started")["status"] == "running"


def leftover(labels):
    return {"Config": {"Labels": labels, "Image": "other:1"}, "State": {"Running": False, "Status": "exited"},
            "HostConfig": {}, "RestartCount": 0}


def test_a_container_of_the_argument_checks_name_that_is_not_ours_is_left_alone(tmp_path):
    # Only ever this recipe's containers: a foreign one named like the check's is neither removed
    # before the check nor after docker refuses the name; the start fails before touching anything.
    docker = FakeDocker(fitting)
    docker.containers["glm53-zig-argument-check"] = leftover({"com.example.app": "mine"})
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, context="65536").run("started")
    assert failed.value.code == "E_START"
    assert ("a container named glm53-zig-argument-check exists without the label "
            "glm53.tensorfold.rank_container.argument-check; it is left alone") in failed.value.message
    assert "glm53-zig-argument-check" in docker.containers
    assert not [c for c in docker.calls if c[1] in ("rm", "run")]
    assert not (tmp_path / ".state" / "argument-check" / "api-key").exists()


def test_an_argument_check_container_a_killed_start_left_is_removed(tmp_path):
    docker = FakeDocker(fitting)
    docker.containers["glm53-zig-argument-check"] = leftover({"glm53.tensorfold.rank_container.argument-check": "true"})
    assert engine(tmp_path, docker, context="65536").run("started")["status"] == "running"
    assert "glm53-zig-argument-check" not in docker.containers and len(argument_checks(docker)) == 1


def test_the_wait_asks_health_four_times_a_second_and_docker_once_a_second(tmp_path):
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536")
    box.run("started")
    asked = []

    def http(path, timeout=5, key=None, body=None):
        asked.append(box.clock())
        return (200, '{"status": "ok"}') if len(asked) > 6 else (None, "refused")

    box.http = http
    calls = len(docker.calls)
    began = box.clock()
    assert box.wait() == "up"
    # Up at the 7th ask, 1.5 s in: asked every 0.25 s, docker asked at 1 s only (`run -d` had
    # just said the container started).
    assert [t - began for t in asked] == [0.25 * n for n in range(7)]
    assert [c[1:3] for c in docker.calls[calls:]] == [["container", "inspect"]]


def test_the_wait_ends_within_a_second_when_the_container_ends(tmp_path):
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536")
    box.run("started")
    box.http = lambda path, timeout=5, key=None, body=None: (None, "refused")
    docker.containers["glm53-zig"]["State"].update(Running=False, Status="exited", ExitCode=1)
    assert box.wait() == "ended: status exited, exit code 1"


def test_the_key_is_a_0600_file_and_in_no_docker_argument(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536", api_key="canary-123").run("started")
    key = tmp_path / ".state" / "api-key"
    # The key alone: an engine that reads the file as it is would take a newline for part of the key.
    assert key.read_text() == "canary-123" and (os.stat(str(key)).st_mode & 0o777) == 0o600
    assert not any("canary-123" in " ".join(call) for call in docker.calls)
    runs = [c for c in docker.calls if c[1] == "run"]
    assert all(any(a.endswith("target=/run/tensorfold/api-key,readonly") for a in c) for c in runs)  # check too


def test_a_key_file_an_earlier_release_wrote_with_a_newline_restarts_nothing(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536", api_key="canary-123").run("started")
    (tmp_path / ".state" / "api-key").write_text("canary-123\n")
    same = engine(tmp_path, docker, context="65536", api_key="canary-123")
    assert same.run("started")["status"] == "running" and not same.changed and starts(docker) == 1
    other = engine(tmp_path, docker, context="65536", api_key="canary-1234")
    assert other.run("started")["status"] == "running" and other.changed and starts(docker) == 2
    assert (tmp_path / ".state" / "api-key").read_text() == "canary-1234"


def end_before_the_replace(tmp_path, docker, ending):
    """Make the next start end with ``ending`` before it touches the running container; returns
    what undoes it."""
    if ending == "E_LOCK":
        held = open(str(tmp_path / ".state" / "start.lock"), "a+")
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file: another holder
        return held.close
    if ending == "E_IMAGE":
        docker.images.discard("img:tag")
        return lambda: docker.images.add("img:tag")
    accepted = docker.argument_check
    docker.argument_check = (2, "", "tensorfold-native: --parallel must be 1 to 8 or auto")
    return lambda: setattr(docker, "argument_check", accepted)


@pytest.mark.parametrize("ending,new_key", [("E_LOCK", "key-B-456"), ("E_IMAGE", "key-B-456"),
                                            ("E_SETTINGS", "key-B-456"), ("E_LOCK", "")])
def test_a_rotated_key_is_recorded_only_once_a_container_started_with_it_runs(tmp_path, ending, new_key):
    # Key A serves; a start with key B ends before it replaces the container, so A still works:
    # the key file must still say A, or the next start (and the fast path) would think B is served.
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536", api_key="key-A-123").run("started")
    key = tmp_path / ".state" / "api-key"
    undo = end_before_the_replace(tmp_path, docker, ending)
    changes = {"context": "65536", "api_key": new_key}
    if ending == "E_SETTINGS":
        changes["env"] = {"NEW": "1"}  # new flags: the engine is asked about them again
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, **changes).run("started")
    undo()
    assert failed.value.code == ending and starts(docker) == 1
    assert key.read_text() == "key-A-123"  # the key the running container reads
    assert not (tmp_path / ".state" / "argument-check" / "api-key").exists()
    # The next start with the new key replaces the container that serves key A.
    again = engine(tmp_path, docker, **changes)
    assert again.run("started")["status"] == "running" and again.changed and starts(docker) == 2
    assert key.read_text() == new_key if new_key else not key.exists()
    assert not engine(tmp_path, docker, **changes).will_replace(ec.Docker(docker).inspect("glm53-zig"), "img:tag")


def test_lock_held_by_another_process_is_e_lock_and_ends_with_that_process(tmp_path):
    (tmp_path / ".state").mkdir()
    lock = str(tmp_path / ".state" / "start.lock")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\nh = open(sys.argv[1], 'a')\n"
                               "fcntl.flock(h, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(60)", lock],
                              stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == b"held"
    docker = FakeDocker(fitting)
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, context="65536").run("started")
    assert failed.value.code == "E_LOCK"
    assert not [c for c in docker.calls if c[1] == "run"]  # nothing touched
    holder.send_signal(signal.SIGKILL)  # a killed start: the kernel drops its lock
    holder.wait()
    assert engine(tmp_path, docker, context="65536").run("started")["status"] == "running"


def test_lock_wait_outlasts_a_start_in_progress(tmp_path):
    lock = ec.Lock(str(tmp_path / "start.lock"))
    other = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\nh = open(sys.argv[1], 'a')\n"
                              "fcntl.flock(h, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(1.5)", lock.path],
                             stdout=subprocess.PIPE)
    assert other.stdout.readline().strip() == b"held"
    started = time.time()
    assert lock.acquire(10)
    assert 0.5 < time.time() - started < 5
    lock.release()
    other.wait()


def test_the_default_lock_wait_outlasts_the_longest_start(tmp_path, monkeypatch):
    # Each of the four starts (the model's window, then three memory refusals, each with other
    # figures) loads for almost the whole wait_timeout, then is refused: the lock is held about
    # four wait_timeouts, and a start waiting the default wait must outlast that.
    clock = {"t": 0.0}

    def serve(window):
        left = {262144: "9.40", 245760: "5.00"}.get(window, "4.00")
        return True, MODEL_WINDOW % window if window > 262144 else no_stream(window, "%.2f" % (10.0 * window / 262144), left), ""

    docker = FakeDocker(serve)
    began = {}

    def run(argv):
        if argv[1] == "run" and "-d" in argv:
            began["t"] = clock["t"]
        answer = docker(argv)
        if argv[1:3] == ["container", "inspect"] and clock["t"] >= began.get("t", 0) + 2399:
            docker.containers["glm53-zig"]["State"].update(Running=False, Status="exited", ExitCode=1)
            answer = docker(argv)
        return answer

    held = {}
    acquire, release = ec.Lock.acquire, ec.Lock.release
    monkeypatch.setattr(ec.Lock, "acquire", lambda lock, *a: held.update(at=clock["t"]) or acquire(lock, *a))
    monkeypatch.setattr(ec.Lock, "release", lambda lock: held.update(by=clock["t"]) or release(lock))
    box = ec.EngineContainer(params(tmp_path, wait_timeout=2400, stop_grace=20, lock_wait=None, parallel="auto"), ec.Docker(run),
                             sleep=lambda s: clock.update(t=clock["t"] + s), clock=lambda: clock["t"],
                             http=lambda path, timeout=5, key=None, body=None: (None, "refused"))
    with pytest.raises(ec.StartFailed) as failed:
        box.run("started")
    assert failed.value.code == "E_FIT" and starts(docker) == ec.MAX_STARTS == 4
    assert 4 * 2399 <= held["by"] - held["at"] <= ec.longest_start_s(2400, 20) == 9760


def test_without_a_lock_wait_a_start_waits_the_longest_start_then_says_e_lock(tmp_path):
    (tmp_path / ".state").mkdir()
    held = open(str(tmp_path / ".state" / "start.lock"), "a+")
    fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    box = engine(tmp_path, FakeDocker(fitting), context="65536", wait_timeout=100, stop_grace=5, lock_wait=None)
    with pytest.raises(ec.StartFailed) as failed:
        box.run("started")
    held.close()
    assert failed.value.code == "E_LOCK" and "(waited 530 s;" in failed.value.message
    assert box.clock() >= 530


def test_stop_turns_the_restart_policy_off_first_and_archives(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536").run("started")
    box = engine(tmp_path, docker)
    result = box.run("stopped")
    names = [c[1] for c in docker.calls]
    assert names.index("update", len(names) - 6) < names.index("stop", len(names) - 6)
    assert result["status"] == "stopped" and result["log_dir"].endswith(".tar.gz") and os.path.exists(result["log_dir"])
    assert "glm53-zig" not in docker.containers and not os.path.lexists(str(tmp_path / "logs" / "current"))


def test_a_stop_marks_the_box_stopped_on_purpose_until_a_start_serves_again(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536").run("started")
    mark = tmp_path / ".state" / ec.STOPPED_MARK
    assert not mark.exists()
    checked = engine(tmp_path, docker)
    checked.check_mode = True
    checked.run("stopped")
    assert not mark.exists(), "check mode writes nothing"
    stopped = engine(tmp_path, docker)
    stopped.run("stopped")
    assert mark.read_text().startswith("stopped on purpose at ") and stopped.changed
    assert engine(tmp_path, docker, context="65536").run("started")["status"] == "running"
    assert not mark.exists()


def test_open_connections_counts_established_sockets_on_the_port(tmp_path):
    (tmp_path / "tcp").write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000:1F54 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"
        "   1: 0100007F:1F54 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 2\n"
        "   2: 0100007F:A1B2 0100007F:1F54 01 00000000:00000000 00:00000000 00000000     0        0 3\n")
    (tmp_path / "tcp6").write_text("header\n   0: 00000000000000000000000001000000:1F54 "
                                   "00000000000000000000000001000000:C000 01 0:0 0:0 0 0 0 4\n")
    assert ec.open_connections(8020, str(tmp_path)) == 2


def test_a_changed_restart_policy_is_applied_in_place_and_reported(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536").run("started")
    box = engine(tmp_path, docker, context="65536", restart_policy="unless-stopped")
    assert box.run("started")["status"] == "running" and box.changed
    assert docker.containers["glm53-zig"]["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
    assert len([c for c in docker.calls if c[1] == "run"]) == 2  # the argument check and one start


def starts(docker):
    return len([c for c in docker.calls if c[1] == "run" and "-d" in c])


@pytest.mark.parametrize("change", [{"image": "img:new"}, {"env": {"NEW": "1"}}, {"api_key": "other-key"},
                                    {"settings": {"tensorfold_parallel": "4", "tensorfold_port": 8020,
                                                  "tensorfold_max_tokens": 8192}}])
def test_defer_replace_leaves_a_changed_container_serving_and_says_it_is_pending(tmp_path, change):
    docker = FakeDocker(fitting, images=("img:tag", "img:new"))
    engine(tmp_path, docker, context="65536", api_key="key-1").run("started")
    before = dict(docker.containers["glm53-zig"]["Config"]["Labels"])
    box = engine(tmp_path, docker, **dict({"context": "65536", "api_key": "key-1", "defer_replace": True}, **change))
    result = box.run("started")
    assert result["status"] == "replace_pending" and not box.changed and starts(docker) == 1
    assert docker.containers["glm53-zig"]["Config"]["Labels"] == before
    assert open(str(tmp_path / ".state" / "api-key")).read() == "key-1"  # the old key stays until the restart
    assert "rolling restart" in " ".join(box.messages)
    # The restart (the rolling restart step) then replaces it.
    again = engine(tmp_path, docker, **dict({"context": "65536", "api_key": "key-1", "defer_replace": True}, **change))
    assert again.run("restarted")["status"] == "running" and starts(docker) == 2


def test_defer_replace_starts_what_needs_no_drain(tmp_path):
    docker = FakeDocker(fitting)
    # No container yet: an ordinary first start.
    first = engine(tmp_path, docker, context="65536", defer_replace=True)
    assert first.run("started")["status"] == "running" and starts(docker) == 1
    # Unchanged: left alone, not pending.
    same = engine(tmp_path, docker, context="65536", defer_replace=True)
    assert same.run("started")["status"] == "running" and not same.changed and starts(docker) == 1
    # Stopped with other settings: nothing to drain, started at once.
    docker.containers["glm53-zig"]["State"].update(Running=False, Status="exited")
    stopped = engine(tmp_path, docker, context="65536", env={"NEW": "1"}, defer_replace=True)
    assert stopped.run("started")["status"] == "running" and starts(docker) == 2


def test_defer_replace_in_check_mode_says_it_would_drain(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, context="65536").run("started")
    plan = engine(tmp_path, docker, context="65536", env={"NEW": "1"}, defer_replace=True)
    plan.check_mode = True
    assert plan.run("started")["status"] == "would_start" and starts(docker) == 1
    assert any("drained at the gateway" in m for m in plan.messages)


def no_stream(window, one, left):
    return ("tensorfold: the CUDA memory budget fits no stream: one at a %d-token window takes %s GiB, and %s GiB "
            "is left after the model's 84.50 GiB and the 4.0 GiB reserve; lower --context, or free device memory"
            % (window, one, left))


MODEL_WINDOW = "tensorfold: --context %d exceeds this model's 262144-token window"


def model_window_then_memory(window):
    """The model takes 262,144 tokens; one stream takes 10.00 GiB at that window and 9.40 GiB is left."""
    if window > 262144:
        return False, MODEL_WINDOW % window, ""
    if window > 245760:
        return False, no_stream(262144, "10.00", "9.40"), ""
    return True, startup(1, window), ""


def test_a_model_window_refusal_then_a_memory_refusal_gets_a_third_start(tmp_path):
    docker = FakeDocker(model_window_then_memory)
    result = engine(tmp_path, docker, parallel="auto").run("started")
    # 9.395 / 10.005 * 262144 = 246162.5 -> 245760.
    assert result["status"] == "running" and result["starts"] == 3 and result["context"] == 245760
    assert starts(docker) == 3
    assert open(str(tmp_path / ".state" / "context-fit.tsv")).read().count("\t245760\t") == 1


def test_the_other_ranks_refusal_after_the_first_ranks_gets_a_third_start(tmp_path):
    # Rank 0 (8 GiB a 1M window, 6.00 GiB left) refuses first and closes the link before rank 1,
    # with less memory (5.00 GiB left, a desktop on its card), prints its figures; the window rank
    # 0's figures allow is then refused by rank 1, and its own figures give the window both fit.
    def serve(window):
        cost = 8.0 * window / 1048576
        if cost > 6.0:
            return False, no_stream(window, "%.2f" % cost, "6.00"), "rank 1: rank 0 closed the control link; exiting"
        if cost > 5.0:
            return False, "rank 0: rank 1 closed the control link; exiting", no_stream(window, "%.2f" % cost, "5.00")
        return True, startup(4, window), "rank 1: settings agreed, NCCL joined"

    docker = FakeDocker(serve)
    result = engine(tmp_path, docker, parallel="auto").run("started")
    assert result["status"] == "running" and result["starts"] == 3 and 8.0 * result["context"] / 1048576 <= 5.0
    assert open(str(tmp_path / ".state" / "context-fit.tsv")).read().count("\t%d\t" % result["context"]) == 1


def test_a_model_window_refusal_then_both_ranks_memory_refusals_get_a_fourth_start(tmp_path):
    # The model takes 202,752 tokens; rank 0 has 5.30 GiB left, rank 1 (a desktop on its card)
    # 4.10 GiB, and rank 0's refusal closes the link before rank 1 prints its own. The model's
    # window names no memory figures, so it does not use up one of the memory starts.
    def serve(window):
        if window > 202752:
            return False, "tensorfold: --context %d exceeds this model's 202752-token window" % window, ""
        cost = 8.0 * window / 1048576
        if 4 * cost > 5.30:
            return False, no_stream(window, "%.2f" % cost, "5.30"), "rank 1: rank 0 closed the control link; exiting"
        if 4 * cost > 4.10:
            return False, "rank 0: rank 1 closed the control link; exiting", no_stream(window, "%.2f" % cost, "4.10")
        return True, startup(4, window), "rank 1: settings agreed, NCCL joined"

    docker = FakeDocker(serve)
    result = engine(tmp_path, docker).run("started")
    assert result["status"] == "running" and result["starts"] == 4 and 4 * 8.0 * result["context"] / 1048576 <= 4.10
    # Only the window that served is recorded, and the next start begins with it.
    cache = open(str(tmp_path / ".state" / "context-fit.tsv")).read()
    assert "\t%d\t" % result["context"] in cache and "\t172544\t" not in cache
    docker.containers.clear()
    again = engine(tmp_path, docker).run("started")
    assert again["starts"] == 1 and again["context"] == result["context"]


def test_a_start_that_fails_records_no_window(tmp_path):
    # The model's window, then memory refusals whose per-stream cost grows with the window (as
    # the engine's does) while each start finds less memory left: E_FIT after every start, and
    # no window refused on the way is what the next start begins with.
    def serve(window):
        left = {262144: "9.40", 245760: "5.00"}.get(window, "4.00")
        return False, MODEL_WINDOW % window if window > 262144 else no_stream(window, "%.2f" % (10.0 * window / 262144), left), ""

    docker = FakeDocker(serve)
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker).run("started")
    assert failed.value.code == "E_FIT" and starts(docker) == 4
    assert not (tmp_path / ".state" / "context-fit.tsv").exists()


def test_starts_stay_bounded_at_three(tmp_path):
    docker = FakeDocker(lambda w: (False, MODEL_WINDOW % w if w > 262144 else no_stream(w, "10.00", "9.40"), ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker).run("started")
    assert failed.value.code == "E_FIT" and starts(docker) == 3
    assert failed.value.message.count("Then, at the window its figures allowed:") == 2
    # A memory refusal first: one retry only, as before.
    docker = FakeDocker(lambda w: (False, no_stream(w, "10.00", "9.40"), ""))
    with pytest.raises(ec.StartFailed):
        engine(tmp_path / "other", docker).run("started")
    assert starts(docker) == 2


def test_a_fixed_context_refused_for_memory_names_the_window_that_fits(tmp_path):
    docker = FakeDocker(lambda w: (False, no_stream(w, "10.00", "9.40"), ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, context="1048576").run("started")
    message = failed.value.message
    assert failed.value.code == "E_FIT" and starts(docker) == 1
    # 9.395 / (4 * 10.005) * 1048576 = 246157.3 -> 245760.
    assert "245760 tokens would fit at --parallel 4" in message
    assert message.endswith("Set tensorfold_context to 245760 (or auto), lower tensorfold_parallel, or free GPU memory.")


def test_a_fixed_context_above_the_model_window_names_the_model_window(tmp_path):
    docker = FakeDocker(lambda w: (False, MODEL_WINDOW % w, ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, context="1048576").run("started")
    assert "this model takes at most 262144 tokens" in failed.value.message
    assert failed.value.message.endswith("Set tensorfold_context to 262144 or less, or to auto.")


def test_when_no_window_fits_the_advice_is_not_a_lower_context(tmp_path):
    # Nothing left: not one stream fits at any window.
    docker = FakeDocker(lambda w: (False, no_stream(w, "10.00", "-0.50"), ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker).run("started")
    message = failed.value.message
    assert failed.value.code == "E_FIT" and starts(docker) == 1
    assert "not one stream fits" in message and message.endswith("does not help.")
    assert "Lower tensorfold_context" not in message
    # One stream fits 512 tokens, four do not fit one page: fewer streams help.
    docker = FakeDocker(lambda w: (False, no_stream(w, "10.00", "0.01"), ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path / "other", docker).run("started")
    message = failed.value.message
    assert "no window fits --parallel 4; one stream would fit 512 tokens" in message
    assert "Lower tensorfold_parallel" in message and "a lower tensorfold_context alone does not help" in message


def test_a_weights_refusal_with_a_negative_budget_is_e_gpu_memory(tmp_path):
    refusal = ("tensorfold: the checkpoint's 84.5 GiB of weights do not fit the -4.0 GiB the CUDA memory budget "
               "grants (8.0 GiB free less a 12.0 GiB reserve, capped by TENSORFOLD_CUDA_MEMORY_LIMIT_GB=8); free "
               "device memory or adjust TENSORFOLD_MEMORY_RESERVE_GIB / TENSORFOLD_CUDA_MEMORY_LIMIT_GB")
    docker = FakeDocker(lambda w: (False, refusal, ""))
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker).run("started")
    assert failed.value.code == "E_GPU_MEMORY" and starts(docker) == 1


def test_a_refusal_split_by_an_nccl_line_is_retried(tmp_path):
    def serve(window):
        if window > 173056:
            return False, REFUSAL[:90] + "\nnode:1:1 [0] NCCL INFO Bootstrap\n" + REFUSAL[90:], ""
        return True, startup(4, window), ""

    result = engine(tmp_path, FakeDocker(serve)).run("started")
    assert result["status"] == "running" and result["starts"] == 2 and result["context"] == 173056


def answer_in_turn(box, answers):
    """Make the box's /health answer these in turn (the last one from then on); return the paths asked."""
    asked = []

    def http(path, timeout=5, key=None, body=None):
        asked.append(path)
        return answers[min(len(asked), len(answers)) - 1]

    box.http = http
    return asked


def test_the_wait_is_up_only_when_health_says_ok(tmp_path):
    # A 200 whose body is not {"status": "ok"} is an engine still loading: not up yet.
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536")
    box.run("started")
    asked = answer_in_turn(box, [(200, '{"status": "loading"}')] * 3 + [(200, '{"status": "ok"}')])
    assert box.wait() == "up" and len(asked) == 4


def test_the_wait_keeps_waiting_while_health_says_warming(tmp_path):
    # The contract's /health says {"status":"ok","warming":true} while the engine warms up: the start
    # is over only once it is warm; an answer without the field (API keys set) is not warming.
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536")
    box.run("started")
    asked = answer_in_turn(box, [(200, '{"status": "ok", "warming": true}')] * 3
                           + [(200, '{"status": "ok", "warming": false}')])
    assert box.wait() == "up" and len(asked) == 4
    box.http = lambda path, timeout=5, key=None, body=None: (200, '{"status":"ok"}')
    assert box.wait() == "up"


def test_a_start_still_warming_when_its_time_runs_out_is_e_api_saying_so(tmp_path):
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536")
    box.http = lambda path, timeout=5, key=None, body=None: (200, '{"status": "ok", "warming": true}')
    with pytest.raises(ec.StartFailed) as failed:
        box.run("started")
    assert failed.value.code == "E_API" and "still says the engine is warming up" in failed.value.message
    assert failed.value.message.endswith("Raise tensorfold_wait_timeout if warming up takes that long on this box.")


def test_with_a_key_the_start_waits_for_an_answered_request_since_health_cannot_say_warming(tmp_path):
    # With API keys /health answers only {"status":"ok"}: one token, asked with the key, tells
    # whether the engine serves warmed up (it answers once it does), within the start's time.
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536", api_key="canary-123")
    box.run("started")
    probes = []
    answers = [(None, "timed out"), (503, ""), (200, '{"choices": []}')]

    def http(path, timeout=5, key=None, body=None):
        if path == "/health":
            return 200, '{"status":"ok"}'
        probes.append((path, key, body, timeout))
        return answers.pop(0)

    box.http = http
    assert box.wait() == "up" and len(probes) == 3
    path, key, body, timeout = probes[0]
    assert path == "/v1/chat/completions" and key == "canary-123" and body["max_tokens"] == 1
    assert body["model"] == "GLM-5.3-Flash" and body["chat_template_kwargs"] == {"enable_thinking": False}
    assert 1 <= timeout <= 2400  # the start's time left, no more
    answers[:] = [(400, "")]  # any answer but busy: serving (the smoke test judges the answers)
    assert box.wait() == "up"
    box.http = lambda path, timeout=5, key=None, body=None: (
        (200, '{"status":"ok","warming":false}') if path == "/health" else (None, "no probe expected"))
    assert box.wait() == "up"  # /health that tells warming is enough
    box.http = lambda path, timeout=5, key=None, body=None: (
        (200, '{"status":"ok"}') if path == "/health" else (503, ""))
    assert box.wait() == "warming"  # never answered in time: as still warming


def test_an_ipv6_api_host_is_bracketed_in_the_modules_urls(tmp_path):
    docker = FakeDocker(fitting)
    box = engine(tmp_path, docker, context="65536", api_host="::1")
    assert box.run("started")["endpoint"] == "http://[::1]:8020/v1"


CARDS = [{"index": 0, "uuid": "GPU-aaaa", "name": "RTX PRO 6000", "memory_total_mib": 97887},
         {"index": 1, "uuid": "GPU-bbbb", "name": "RTX PRO 6000", "memory_total_mib": 97887},
         {"index": 2, "uuid": "GPU-cccc", "name": "RTX PRO 6000", "memory_total_mib": 97887}]


def test_a_restart_on_its_own_reads_the_cards_once_and_pins_them_by_uuid(tmp_path):
    docker = FakeDocker(fitting)
    engine(tmp_path, docker, gpu_requests=True).run("started")
    reads = []
    restart = engine(tmp_path, docker, read_gpus=lambda: reads.append(1) or CARDS, gpu_requests=True, gpu_indices=[2, 0])
    assert restart.run("restarted")["status"] == "running" and reads == [1]
    run = [c for c in docker.calls if c[1] == "run" and "-d" in c][-1]
    assert run[run.index("--gpus") + 1] == '"device=GPU-cccc,GPU-aaaa"'
    runner = open(str(tmp_path / "logs" / "current" / "runner.sh")).read()
    assert "CUDA_VISIBLE_DEVICES=GPU-cccc,GPU-aaaa" in runner
    record = json.load(open(str(tmp_path / ".state" / "engine.json")))
    assert record["device_ids"] == ["GPU-cccc", "GPU-aaaa"] and record["cuda_devices"] == "GPU-cccc,GPU-aaaa"


def test_the_cards_the_host_checks_read_are_not_read_again_and_a_stop_reads_none(tmp_path):
    docker = FakeDocker(fitting)

    def unread():
        pytest.fail("the cards were read again")

    started = engine(tmp_path, docker, read_gpus=unread, gpus=CARDS[:2], gpu_requests=True)
    assert started.run("started")["status"] == "running"
    run = [c for c in docker.calls if c[1] == "run" and "-d" in c][-1]
    assert run[run.index("--gpus") + 1] == '"device=GPU-aaaa,GPU-bbbb"'
    assert engine(tmp_path, docker, read_gpus=unread).run("stopped")["status"] == "stopped"


def test_the_fit_key_takes_rank_0s_card_unless_the_fields_name_one(tmp_path):
    fields = {"checkpoint_revision": "abc"}
    read = engine(tmp_path, FakeDocker(fitting), read_gpus=lambda: CARDS, fit_fields=fields, gpu_indices=[1, 0])
    given = engine(tmp_path, FakeDocker(fitting), fit_fields=dict(fields, gpu_name="RTX PRO 6000", gpu_memory_mib=97887))
    other = engine(tmp_path, FakeDocker(fitting), read_gpus=lambda: [dict(c, memory_total_mib=49152) for c in CARDS],
                   fit_fields=fields)
    assert read.fit_key("img:tag") == given.fit_key("img:tag") != other.fit_key("img:tag")


def test_a_docker_without_the_nvidia_hook_refusing_gpus_is_e_nvidia_runtime_not_e_start(tmp_path):
    # dockerd with the nvidia runtime in daemon.json but no nvidia-container-runtime-hook on its PATH (moby's
    # daemon/errors.go words): --gpus has no device driver.
    docker = FakeDocker(fitting)
    docker.run_refusal = (125, "", 'docker: Error response from daemon: could not select device driver "" with '
                                   "capabilities: [[gpu]].")
    with pytest.raises(ec.StartFailed) as failed:
        cards = [{"index": 0, "uuid": "GPU-0"}, {"index": 1, "uuid": "GPU-1"}]
        engine(tmp_path, docker, context="65536", gpu_requests=True, gpus=cards).run("started")
    assert failed.value.code == "E_NVIDIA_RUNTIME"
    assert 'could not select device driver "" with capabilities: [[gpu]]' in failed.value.message
    assert "nvidia-container-runtime-hook" in failed.value.message
    # Any other refusal stays docker's own E_START.
    docker.run_refusal = (125, "", "docker: Error response from daemon: invalid mount config")
    with pytest.raises(ec.StartFailed) as failed:
        engine(tmp_path, docker, context="65536").run("started")
    assert failed.value.code == "E_START"


OPEN_WARNING = "warning: non-loopback server has no API key; requests are open"


def test_an_engine_that_warns_it_serves_without_a_key_beyond_loopback_gives_w_open_api(tmp_path):
    docker = FakeDocker(lambda window: (True, "%s\n%s" % (OPEN_WARNING, startup(4, window)), "rank 1: settings agreed"))
    result = engine(tmp_path, docker, context="131072").run("started")
    assert result["status"] == "running"
    assert [w["code"] for w in result["warnings"]] == ["W_OPEN_API"]
    assert "port 8020" in result["warnings"][0]["message"]


def test_only_the_last_start_of_the_log_counts_for_w_open_api(tmp_path):
    # The runner appends each start to rank0.log: an earlier open start, then one with a key.
    earlier = "runner: glm53-zig starting rank 1 and rank 0\n%s\n%s" % (OPEN_WARNING, startup(4, 131072))
    latest = "runner: glm53-zig starting rank 1 and rank 0\n%s" % startup(4, 131072)
    docker = FakeDocker(lambda window: (True, earlier + "\n" + latest, "rank 1: settings agreed"))
    result = engine(tmp_path, docker, context="131072").run("started")
    assert result["status"] == "running" and result["warnings"] == []
