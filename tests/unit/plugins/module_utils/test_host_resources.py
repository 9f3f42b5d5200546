# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket

from ansible_collections.glm53.tensorfold.plugins.module_utils import host_resources as res

GIB = 1024 ** 3
# A host with / on device 1, /srv on device 2 and /var/lib/docker on device 3.
EXISTING = {"/", "/srv", "/var", "/var/lib", "/var/lib/docker", "/srv/glm53"}
DEVICES = {"/": 1, "/var": 1, "/var/lib": 1, "/srv": 2, "/srv/glm53": 2, "/var/lib/docker": 3}
FREE = {1: 50 * GIB, 2: 185 * GIB, 3: 45 * GIB}


def budget(requests):
    return res.disk_budget(requests, EXISTING.__contains__, DEVICES.__getitem__,
                           lambda path: FREE[DEVICES[path]])


def test_a_missing_path_lands_on_its_nearest_existing_parent():
    assert res.nearest_existing("/srv/glm53/model/x", EXISTING.__contains__) == "/srv/glm53"
    assert res.nearest_existing("/opt/nothing", EXISTING.__contains__) == "/"


def test_paths_on_one_filesystem_add_up_and_can_fail_together():
    result = budget([
        {"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 180},
        {"name": "drafter", "path": "/srv/glm53/drafter", "need_gib": 10},
        {"name": "image build", "path": "/var/lib/docker", "need_gib": 40},
    ])
    assert [(fs["mount"], fs["need_gib"], fs["free_gib"], fs["ok"]) for fs in result] == [
        ("/srv", 190, 185.0, False),
        ("/var/lib/docker", 40, 45.0, True),
    ]
    assert [p["lands_on"] for p in result[0]["paths"]] == ["/srv/glm53", "/srv/glm53"]


def test_each_path_alone_fits_on_separate_filesystems():
    result = budget([
        {"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 180},
        {"name": "drafter", "path": "/opt/drafter", "need_gib": 10},
    ])
    assert [fs["ok"] for fs in result] == [True, True]
    assert result[1]["mount"] == "/"


def test_meminfo_available_in_mib():
    text = "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   16777216 kB\n"
    assert res.parse_meminfo(text) == 16384
    assert res.parse_meminfo("MemTotal: 1 kB\n") is None


def test_a_listening_port_is_not_free_and_a_closed_one_is():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        free, why = res.port_free(port, "127.0.0.1")
        assert not free
        assert why == "port %d is in use on 127.0.0.1" % port
    finally:
        server.close()
    assert res.port_free(port, "127.0.0.1") == (True, "")


def test_an_address_the_host_lacks_is_named():
    free, why = res.port_free(8020, "192.0.2.1")
    assert not free
    assert "192.0.2.1" in why


def test_tools_report_missing_as_none():
    assert res.find_tools(["curl", "hf"], {"curl": "/usr/bin/curl"}.get) == {"curl": "/usr/bin/curl", "hf": None}


# --- what is still missing (weights_fetch's verified-manifest records) ---------------------------
REV = "078455ffe6472f9a52fbc1139f58b9db2881b25c"
LISTING = {"entries": [
    {"type": "file", "path": "config.json", "size": 100, "oid": "a" * 40},
    {"type": "file", "path": "model-00001-of-00002.safetensors", "size": 90 * GIB, "oid": "b" * 40,
     "lfs": {"oid": "c" * 64, "size": 90 * GIB, "pointerSize": 134}},
    {"type": "file", "path": "model-00002-of-00002.safetensors", "size": 74 * GIB, "oid": "d" * 40,
     "lfs": {"oid": "e" * 64, "size": 74 * GIB, "pointerSize": 134}},
]}
ON_DISK = {"/srv/glm53/model/config.json": (100, 1), "/srv/glm53/model/model-00001-of-00002.safetensors": (90 * GIB, 2),
           "/srv/glm53/model/model-00002-of-00002.safetensors": (74 * GIB, 3)}


def records(*paths):
    from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan  # pylint: disable=import-outside-toplevel
    kept = {}
    for spec in hf_plan.plan_files(LISTING["entries"]):
        if spec["path"] in paths:
            size, mtime = ON_DISK["/srv/glm53/model/" + spec["path"]]
            kept[hf_plan.verify_key(REV, spec, size, mtime)] = spec["digest"]
    return kept


def test_weights_verified_in_place_need_no_space():
    every = records("config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    assert res.weights_still_needed(LISTING, every, REV, "/srv/glm53/model", ON_DISK.get) == 0


def test_only_files_whose_record_no_longer_holds_need_space():
    some = records("config.json", "model-00001-of-00002.safetensors")
    assert res.weights_still_needed(LISTING, some, REV, "/srv/glm53/model", ON_DISK.get) == 74 * GIB
    touched = dict(ON_DISK)
    touched["/srv/glm53/model/model-00001-of-00002.safetensors"] = (90 * GIB, 99)  # mtime changed: hashed again
    every = records("config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    assert res.weights_still_needed(LISTING, every, REV, "/srv/glm53/model", touched.get) == 90 * GIB
    gone = dict(ON_DISK)
    del gone["/srv/glm53/model/model-00002-of-00002.safetensors"]
    assert res.weights_still_needed(LISTING, every, REV, "/srv/glm53/model", gone.get) == 74 * GIB


def test_records_of_another_revision_do_not_count():
    every = records("config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
    assert res.weights_still_needed(LISTING, every, "f" * 40, "/srv/glm53/model", ON_DISK.get) == 164 * GIB + 100


def test_no_listing_means_the_default_need():
    assert res.weights_still_needed(None, {}, REV, "/srv/glm53/model", ON_DISK.get) is None


def test_weights_need_gib_reads_the_records_on_disk(tmp_path):
    import json  # pylint: disable=import-outside-toplevel
    from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_plan  # pylint: disable=import-outside-toplevel
    model, state = tmp_path / "model", tmp_path / "state"
    model.mkdir()
    state.mkdir()
    (model / "config.json").write_bytes(b"x" * 100)
    listing = {"entries": [LISTING["entries"][0], dict(LISTING["entries"][1], size=GIB,
                                                       lfs=dict(LISTING["entries"][1]["lfs"], size=GIB))]}
    (state / ("listing-%s.json" % REV)).write_text(json.dumps(listing))
    spec = hf_plan.plan_files(listing["entries"])[0]
    st = (model / "config.json").stat()
    (state / "verified.json").write_text(json.dumps({hf_plan.verify_key(REV, spec, st.st_size, st.st_mtime_ns): spec["digest"]}))
    request = {"path": str(model), "state_dir": str(state), "revision": REV, "need_gib": 180}
    assert res.weights_need_gib(request) == (1.0, "1.0 GiB not yet in place")
    assert res.weights_need_gib(dict(request, revision="f" * 40)) == (180, "")
    assert res.weights_need_gib({"path": str(model), "need_gib": 10}) == (10, "")


def test_a_second_deploy_with_weights_in_place_passes_on_20_gib():
    # The weights in place (need 0) and an image present (need 0): 20 GiB free is enough.
    result = res.disk_budget([{"name": "checkpoint", "path": "/srv/glm53/model", "need_gib": 0, "in_place": "verified in place"},
                              {"name": "drafter", "path": "/srv/glm53/drafter", "need_gib": 0, "in_place": "verified in place"},
                              {"name": "image build", "path": "/srv/glm53", "need_gib": 0, "in_place": "image present"}],
                             EXISTING.__contains__, DEVICES.__getitem__, lambda path: 20 * GIB)
    assert [fs["ok"] for fs in result] == [True]


def test_docker_info_answer_reads_runtimes_root_and_the_first_error_line():
    good = res.docker_info_answer(0, '{"DockerRootDir": "/srv/docker", "Runtimes": {"runc": {}, "nvidia": {}}}', "")
    assert good == {"ok": True, "error": "", "runtimes": ["nvidia", "runc"], "root_dir": "/srv/docker"}
    down = res.docker_info_answer(1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\nmore")
    assert down == {"ok": False, "error": "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.",
                    "runtimes": [], "root_dir": "/var/lib/docker"}
    assert res.docker_info_answer(0, "not json", "")["ok"] is False
    assert res.docker_info_answer(127, "", "")["error"] == "exit status 127"


def test_a_daemon_that_does_not_answer_is_not_taken_for_one_without_runtimes():
    # Docker 20.10's client, its daemon stopped: exit 0, only the client's half and the daemon's error.
    out = ('{"ServerErrors":["Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker '
           'daemon running?"],"ClientInfo":{"Debug":false,"Context":"default","Plugins":[],"Warnings":null}}')
    down = res.docker_info_answer(0, out, "")
    assert down["ok"] is False
    assert down["error"].startswith("Cannot connect to the Docker daemon")
    assert down["runtimes"] == []
    # A daemon that answers has no ServerErrors (or an empty list): its runtimes are read.
    up = res.docker_info_answer(0, '{"ServerErrors": [], "Runtimes": {"runc": {}}}', "")
    assert up["ok"] is True and up["runtimes"] == ["runc"]


def test_group_names_keeps_a_group_without_a_name_as_its_number():
    names = {0: "root", 998: "docker"}
    assert res.group_names([0, 998, 4242], names.__getitem__) == ["root", "docker", "4242"]


class DockerAsked(object):
    """A module whose `docker info` fails ``down`` times (a daemon restarting), then answers."""

    def __init__(self, down):
        self.down = down
        self.asked = 0

    def get_bin_path(self, name, required=False):
        return None  # no coreutils timeout: docker runs as it is

    def run_command(self, argv):
        self.asked += 1
        if argv[1] == "info" and self.asked <= self.down:
            return 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
        return 0, '{"Runtimes": {"nvidia": {}, "runc": {}}, "DockerRootDir": "/var/lib/docker"}', ""


def clock_and_sleep():
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
    return (lambda: now[0]), sleep


def test_a_restarted_daemon_is_asked_again_until_it_answers_within_the_wait():
    clock, sleep = clock_and_sleep()
    module = DockerAsked(down=3)
    answer = res.ask_docker(module, "/usr/bin/docker", None, "root", wait=30, clock=clock, sleep=sleep)
    assert answer["ok"] and answer["runtimes"] == ["nvidia", "runc"] and module.asked == 4 and clock() == 3


def test_a_daemon_that_stays_down_is_reported_once_the_wait_is_over_and_at_once_without_one():
    clock, sleep = clock_and_sleep()
    module = DockerAsked(down=1000)
    answer = res.ask_docker(module, "/usr/bin/docker", None, "root", wait=5, clock=clock, sleep=sleep)
    assert not answer["ok"] and "Cannot connect" in answer["error"] and module.asked == 6 and clock() == 5
    module = DockerAsked(down=1000)
    assert not res.ask_docker(module, "/usr/bin/docker", None, "root", clock=clock, sleep=sleep)["ok"]
    assert module.asked == 1


def test_the_user_is_the_effective_uids_not_the_logins_environment(monkeypatch):
    # `su` to root keeps USER and LOGNAME of the login; the checks run as root all the same.
    monkeypatch.setenv("USER", "deploy")
    monkeypatch.setenv("LOGNAME", "deploy")
    assert res.effective_user(lambda: 0) == "root"
    assert res.effective_user(lambda: 4242424) == "4242424"  # no such account


# `docker info --format '{{json .}}'` of podman-docker's `docker` (Podman 4.9): Podman's own info.
PODMAN_INFO = ('{"host": {"arch": "amd64", "ociRuntime": {"name": "crun", "path": "/usr/bin/crun"}, '
               '"remoteSocket": {"exists": false, "path": "/run/podman/podman.sock"}}, '
               '"store": {"graphRoot": "/var/lib/containers/storage"}, "registries": {}, '
               '"plugins": {"volume": ["local"]}, "version": {"APIVersion": "4.9.3", "Version": "4.9.3"}}')


def test_a_docker_that_is_podman_is_named_not_taken_for_a_docker_daemon_without_runtimes():
    answer = res.docker_info_answer(0, PODMAN_INFO, "Emulate Docker CLI using podman. Create /etc/containers/nodocker to quiet msg.")
    assert answer["ok"] is False and answer["engine"] == "podman"
    assert answer["error"] == "docker is Podman 4.9.3 (the podman-docker package), not Docker Engine"
    assert answer["runtimes"] == [] and answer["root_dir"] == "/var/lib/docker"
    # Docker Engine's answer has ServerVersion: never Podman, whatever else it holds.
    docker = res.docker_info_answer(0, '{"ServerVersion": "28.0.1", "Runtimes": {"runc": {}}, "host": {}}', "")
    assert docker["ok"] is True and "engine" not in docker


def _executable(path, text="#!/bin/sh\nexit 0\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def test_dockerd_path_is_the_running_dockerds_own_else_systemds_default(tmp_path):
    proc = tmp_path / "proc"
    (proc / "17").mkdir(parents=True)
    (proc / "17" / "comm").write_text("containerd\n")
    (proc / "17" / "environ").write_bytes(b"PATH=/nowhere\0")
    assert res.dockerd_path(str(proc)) == res.SYSTEMD_PATH
    (proc / "42").mkdir()
    (proc / "42" / "comm").write_text("dockerd\n")
    (proc / "42" / "cmdline").write_bytes(b"/usr/bin/dockerd\0-H\0fd://\0")
    (proc / "42" / "environ").write_bytes(b"LANG=C\0PATH=/opt/nvidia/bin:/usr/bin\0HOME=/root\0")
    assert res.dockerd_path(str(proc)) == "/opt/nvidia/bin:/usr/bin"
    assert res.dockerd_path(str(tmp_path / "absent")) == res.SYSTEMD_PATH


def test_the_gpu_hook_is_looked_up_on_dockerds_path_cdi_hook_only_with_cdi_on(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    monkeypatch.setattr(res, "dockerd_path", lambda: str(bin_dir))
    module = DockerAsked(down=0)
    # Docker's --gpus needs nvidia-container-runtime-hook on dockerd's PATH; the nvidia runtime alone is not enough.
    assert res.ask_docker(module, "/usr/bin/docker", None, "root")["gpu_hook"] is None
    _executable(bin_dir / "nvidia-cdi-hook")
    assert res.ask_docker(module, "/usr/bin/docker", None, "root")["gpu_hook"] is None  # CDI off: not used
    hook = _executable(bin_dir / "nvidia-container-runtime-hook")
    assert res.ask_docker(module, "/usr/bin/docker", None, "root")["gpu_hook"] == hook
    (bin_dir / "nvidia-container-runtime-hook").unlink()

    etc_cdi, run_cdi = tmp_path / "etc-cdi", tmp_path / "run-cdi"

    class CdiOn(DockerAsked):
        def run_command(self, argv):
            return 0, json.dumps({"Runtimes": {"runc": {}}, "CDISpecDirs": [str(etc_cdi), str(run_cdi)]}), ""
    # CDI on but no spec for NVIDIA's GPUs (nvidia-ctk cdi generate never ran): --gpus has nothing to give.
    assert res.ask_docker(CdiOn(0), "/usr/bin/docker", None, "root")["gpu_hook"] is None
    run_cdi.mkdir()
    (run_cdi / "nvidia.yaml").write_text('cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n')
    assert res.ask_docker(CdiOn(0), "/usr/bin/docker", None, "root")["gpu_hook"] == str(bin_dir / "nvidia-cdi-hook")
    # A daemon that does not answer is not looked at further.
    assert "gpu_hook" not in res.ask_docker(DockerAsked(down=5), "/usr/bin/docker", None, "root")


def test_running_dockerd_names_its_program_and_the_daemon_json_it_read(tmp_path):
    proc = tmp_path / "proc"
    (proc / "900").mkdir(parents=True)
    (proc / "900" / "comm").write_text("dockerd\n")
    # The snap's dockerd (docker snap 27.2): its wrapper passes the snap's own daemon.json.
    (proc / "900" / "cmdline").write_bytes(b"/snap/docker/2963/bin/dockerd\0--group\0docker\0"
                                           b"--exec-root=/run/snap.docker\0--data-root\0/var/snap/docker/common/var-lib-docker\0"
                                           b"--pidfile=/run/snap.docker/docker.pid\0"
                                           b"--config-file=/var/snap/docker/2963/config/daemon.json\0")
    (proc / "900" / "exe").symlink_to("/snap/docker/2963/bin/dockerd")
    seen = res.running_dockerd(str(proc))
    assert seen["exe"] == "/snap/docker/2963/bin/dockerd" and seen["pid"] == 900
    assert seen["config_file"] == "/var/snap/docker/2963/config/daemon.json"
    assert seen["path"] == res.SYSTEMD_PATH  # its environment unreadable
    # docker.service's dockerd: -H fd:// and no --config-file reads /etc/docker/daemon.json; a drop-in's flag wins.
    (proc / "900" / "cmdline").write_bytes(b"/usr/bin/dockerd\0-H\0fd://\0--containerd=/run/containerd/containerd.sock\0")
    assert res.running_dockerd(str(proc))["config_file"] == "/etc/docker/daemon.json"
    (proc / "900" / "cmdline").write_bytes(b"/usr/bin/dockerd\0--config-file\0/srv/docker/daemon.json\0")
    assert res.running_dockerd(str(proc))["config_file"] == "/srv/docker/daemon.json"
    assert res.running_dockerd(str(tmp_path / "none")) is None


def test_roots_dockerd_is_read_before_a_users_rootless_one(tmp_path):
    proc = tmp_path / "proc"
    for pid, uid, argv in ((300, 1000, b"dockerd\0--config-file=/home/u/.config/docker/daemon.json\0"),
                           (700, 0, b"/usr/bin/dockerd\0-H\0fd://\0")):
        folder = proc / str(pid)
        folder.mkdir(parents=True)
        (folder / "comm").write_text("dockerd\n")
        (folder / "cmdline").write_bytes(argv)
        (folder / "status").write_text("Name:\tdockerd\nUid:\t%d\t%d\t%d\t%d\n" % (uid, uid, uid, uid))
    seen = res.running_dockerd(str(proc))
    assert seen["pid"] == 700 and seen["config_file"] == "/etc/docker/daemon.json"
    # A user's rootless dockerd alone is not root's Docker: none runs for root.
    (proc / "700" / "comm").write_text("containerd\n")
    assert res.running_dockerd(str(proc)) is None


def test_a_docker_info_that_hangs_is_cut_off_and_named_not_waited_for_forever():
    class Wedged(DockerAsked):
        """A dockerd that never answers: coreutils' timeout ends `docker info` (exit 124)."""

        def get_bin_path(self, name, required=False):
            return "/usr/bin/timeout" if name == "timeout" else None

        def run_command(self, argv):
            self.argv = argv
            return 124, "", ""
    module = Wedged(down=0)
    answer = res.ask_docker(module, "/usr/bin/docker", None, "root")
    assert module.argv == ["/usr/bin/timeout", "--kill-after=5", "60", "/usr/bin/docker", "info", "--format", "{{json .}}"]
    assert answer["ok"] is False
    assert answer["error"] == ("docker info did not answer within 60 s: the Docker daemon hangs "
                               "(systemctl status docker; journalctl -u docker)")
