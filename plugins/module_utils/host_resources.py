# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Host resources the checks need: disk per filesystem, available memory, free ports, tools.

The arithmetic is pure (the filesystem calls are passed in) so the unit tests can give it any
layout; ``port_free`` binds a real socket, which is the only honest test of a port.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import importlib.util
import json
import os
import platform
import socket
import sys
import time

from ansible_collections.glm53.tensorfold.plugins.module_utils import box_module, hf_plan, hf_records
from ansible_collections.glm53.tensorfold.plugins.module_utils.nvidia_smi_command import ModuleFailed, SoftFail, read_gpu_info

# Every module_utils file on_box imports, itself first: what the box reader sends.
READER_MODULES = ("host_resources", "box_module", "hf_plan", "hf_records", "nvidia_smi_command", "nvidia_smi")

GIB = 1024 ** 3


def nearest_existing(path, exists=os.path.exists):
    """The path itself when it exists, else its nearest existing parent (where it would land)."""
    path = os.path.abspath(path)
    while not exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def mount_point(path, device_of):
    """The top of the filesystem ``path`` is on: climb while the parent has the same device."""
    path = os.path.abspath(path)
    device = device_of(path)
    while True:
        parent = os.path.dirname(path)
        if parent == path or device_of(parent) != device:
            return path
        path = parent


def disk_budget(requests, exists, device_of, free_bytes):
    """Sum what each path needs on the filesystem it lands on, and compare with what is free.

    ``requests`` is a list of ``{name, path, need_gib}``. Returns one dict per filesystem, in the
    order first met: ``{device, mount, free_gib, need_gib, ok, paths: [{name, path, lands_on,
    need_gib}]}``. Two paths on one filesystem share its free space, so their needs add up.
    """
    filesystems = []
    by_device = {}
    for request in requests:
        lands_on = nearest_existing(request["path"], exists)
        device = device_of(lands_on)
        entry = by_device.get(device)
        if entry is None:
            entry = {
                "device": device,
                "mount": mount_point(lands_on, device_of),
                "free_gib": round(free_bytes(lands_on) / float(GIB), 1),
                "need_gib": 0,
                "paths": [],
            }
            by_device[device] = entry
            filesystems.append(entry)
        entry["need_gib"] += request["need_gib"]
        entry["paths"].append({"name": request["name"], "path": request["path"],
                               "lands_on": lands_on, "need_gib": request["need_gib"],
                               "in_place": request.get("in_place", "")})
    for entry in filesystems:
        entry["ok"] = entry["free_gib"] >= entry["need_gib"]
    return filesystems


def weights_still_needed(listing, records, revision, local_dir, stat):
    """Bytes of a pinned snapshot not yet verified in place, from weights_fetch's own records.

    ``listing`` is the recorded file list of ``revision`` (``{"entries": [...]}``) or None when the
    host never listed it; ``records`` the verified-manifest record (``verified.json``); ``stat`` a
    function giving ``(size, mtime_ns)`` of a path or None. A file whose record still holds (same
    revision, path, size and mtime) needs no space; any other file needs its full size. Returns
    None when there is no listing (nothing known: the default need applies).
    """
    if not listing or not isinstance(listing.get("entries"), list):
        return None
    needed = 0
    for spec in hf_plan.plan_files(listing["entries"]):
        seen = stat(os.path.join(local_dir, spec["path"]))
        if seen is None or not hf_plan.is_verified(records or {}, revision, spec, seen[0], seen[1]):
            needed += spec["size"]
    return needed


def _stat(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def weights_need_gib(request):
    """What a weights path still needs (GiB) and why, reading weights_fetch's records on the host.

    ``request`` carries ``path`` (the snapshot's folder), ``state_dir`` and ``revision``. Returns
    ``(need_gib, why)``; the default ``need_gib`` when the host holds no listing of that revision.
    """
    state_dir, revision = request.get("state_dir"), request.get("revision")
    if not state_dir or not revision:
        return request["need_gib"], ""
    listing, records = hf_records.recorded_state(state_dir, revision)
    needed = weights_still_needed(listing, records, revision, request["path"], _stat)
    if needed is None:
        return request["need_gib"], ""
    if needed == 0:
        return 0, "verified in place"
    return round(needed / float(GIB), 1), "%s not yet in place" % hf_plan.human_bytes(needed)


def statvfs_free_bytes(path):
    """Bytes an unprivileged user may still write on the filesystem of ``path``."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def device_id(path):
    return os.stat(path).st_dev


def parse_meminfo(text):
    """``MemAvailable`` from /proc/meminfo in MiB (None when the kernel does not report it)."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            return int(fields[1]) // 1024  # the kernel reports kB
    return None


def port_free(port, address="0.0.0.0"):
    """``(free, why)``: try to bind ``address:port`` for TCP the way a server would.

    SO_REUSEADDR is set as servers set it, so a port left in TIME_WAIT reads free while a port
    another program listens on does not.
    """
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(1)
        return True, ""
    except (OSError, socket.error) as err:
        if err.errno == errno.EADDRINUSE:
            return False, "port %d is in use on %s" % (port, address)
        if err.errno == errno.EACCES:
            return False, "port %d cannot be bound on %s: permission denied" % (port, address)
        if err.errno == errno.EADDRNOTAVAIL:
            return False, "address %s is not on this host (port %d)" % (address, port)
        return False, "port %d cannot be bound on %s: %s" % (port, address, err)
    finally:
        sock.close()


def find_tools(names, which):
    """``{name: path or None}`` for each tool, using ``which(name)``."""
    return dict((name, which(name) or None) for name in names)


DOCKER_ROOT = "/var/lib/docker"


def podman_version(info):
    """The Podman version when ``docker info`` was answered by Podman (the podman-docker package's
    ``docker`` runs ``podman``), "" when its version is not said, None for Docker Engine. Podman's
    info has ``host``, ``store`` and ``version`` objects, and none of Docker's ``ServerVersion``,
    ``Runtimes`` or ``DockerRootDir``."""
    if not isinstance(info, dict) or "ServerVersion" in info or not isinstance(info.get("host"), dict):
        return None
    if not isinstance(info.get("store"), dict) and not isinstance(info.get("version"), dict):
        return None
    version = info.get("version")
    return str(version.get("Version") or "") if isinstance(version, dict) else ""


def docker_info_answer(rc, out, err):
    """``docker info --format '{{json .}}'``'s answer: ok, the first line of its error, the runtime
    names and the root folder (Docker's default when it does not say). A client that cannot reach
    its daemon may still exit 0 and print only its own half, the daemon's error in ``ServerErrors``
    (Docker 20.10 does): that is a daemon that does not answer, not one without runtimes. A
    ``docker`` that is Podman (podman-docker) is no Docker daemon either: ``engine`` says so."""
    info = {}
    if rc == 0:
        try:
            info = json.loads(out or "{}")
        except ValueError:
            rc, err = 1, "docker info gave no JSON: %s" % (out or "").strip()[:200]
    server_errors = info.get("ServerErrors") if isinstance(info, dict) else None
    if rc == 0 and server_errors:
        rc, err = 1, "\n".join(str(error) for error in server_errors)
    podman = podman_version(info) if rc == 0 else None
    if podman is not None:
        rc, err = 1, ("docker is Podman %s (the podman-docker package), not Docker Engine"
                      % (podman or "of an unknown version"))
        info = {}
    lines = (err or "").strip().splitlines()
    answer = {"ok": rc == 0, "error": "" if rc == 0 else (lines[0].strip() if lines else "exit status %d" % rc),
              "runtimes": sorted((info.get("Runtimes") or {}).keys()) if isinstance(info, dict) else [],
              "root_dir": (info.get("DockerRootDir") if isinstance(info, dict) else None) or DOCKER_ROOT}
    if podman is not None:
        answer["engine"] = "podman"
    if isinstance(info, dict) and info.get("CDISpecDirs"):  # Docker 25+ with CDI on
        answer["cdi_spec_dirs"] = list(info["CDISpecDirs"])
    return answer


# What `docker run --gpus` needs on dockerd's PATH: dockerd registers its nvidia device driver only
# when it finds this hook (the "nvidia" runtime of daemon.json plays no part in --gpus), or, from
# Docker 28 on, the CDI hook, which serves --gpus through CDI when CDI is on.
GPU_HOOK = "nvidia-container-runtime-hook"
CDI_HOOK = "nvidia-cdi-hook"
# systemd's default PATH, the one docker.service's dockerd gets unless a drop-in sets another
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


DEFAULT_DAEMON_JSON = "/etc/docker/daemon.json"


def _option(argv, name):
    """The value of ``--name VALUE`` or ``--name=VALUE`` in argv (the last one), else None."""
    found = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1:]
    return found


def _uid(folder):
    """The real uid of the process whose /proc folder this is (None when it cannot be read)."""
    try:
        with open(os.path.join(folder, "status")) as handle:
            for line in handle:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (IOError, OSError, ValueError, IndexError):
        pass
    return None


def running_dockerd(proc="/proc"):
    """The running dockerd, read from /proc as root can: ``exe`` (its program: under /snap/ for the
    snap's), ``flags`` (its command line after the program), ``path`` (its PATH; systemd's default
    when its environment cannot be read) and ``config_file`` (the daemon.json it read at its start:
    its --config-file, else /etc/docker/daemon.json); None when no dockerd runs. Only root's: a
    rootless one (a user's, under rootlesskit) reads the user's ~/.config/docker/daemon.json and is
    not the one `docker` asks as root, nor the one the toolkit step configures."""
    try:
        pids = sorted((name for name in os.listdir(proc) if name.isdigit()), key=int)
    except OSError:
        return None
    for pid in pids:
        if _uid(os.path.join(proc, pid)) not in (0, None):
            continue
        folder = os.path.join(proc, pid)
        try:
            with open(os.path.join(folder, "comm")) as handle:
                if handle.read().strip() != "dockerd":
                    continue
            with open(os.path.join(folder, "cmdline"), "rb") as handle:
                argv = [arg.decode("utf-8", "replace") for arg in handle.read().split(b"\0") if arg]
        except (IOError, OSError):
            continue
        try:
            exe = os.readlink(os.path.join(folder, "exe"))
        except OSError:
            exe = argv[0] if argv else "dockerd"
        path = SYSTEMD_PATH
        try:
            with open(os.path.join(folder, "environ"), "rb") as handle:
                for item in handle.read().split(b"\0"):
                    if item.startswith(b"PATH="):
                        path = item[5:].decode("utf-8", "replace")
        except (IOError, OSError):
            pass
        return {"pid": int(pid), "exe": exe, "flags": argv[1:], "path": path,
                "config_file": _option(argv[1:], "--config-file") or DEFAULT_DAEMON_JSON}
    return None


def dockerd_path(proc="/proc"):
    """The PATH of the running dockerd (read from its environment, which root can), else systemd's
    default PATH, which docker.service's dockerd gets."""
    dockerd = running_dockerd(proc)
    return dockerd["path"] if dockerd else SYSTEMD_PATH


def nvidia_cdi_spec(folders):
    """The first CDI spec in folders (docker info's CDISpecDirs) that names NVIDIA's GPUs (the kind
    ``nvidia.com/gpu``, as ``nvidia-ctk cdi generate`` and nvidia-cdi-refresh write it), or None:
    without one, dockerd's CDI path for --gpus has no device to give."""
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".yaml", ".yml", ".json")):
                continue
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    if b"nvidia.com/gpu" in handle.read(1 << 20):
                        return os.path.join(folder, name)
            except (IOError, OSError):
                continue
    return None


def find_on_path(name, path, is_executable=None):
    """The first executable ``name`` in the folders of ``path`` (as Go's exec.LookPath), or None."""
    if is_executable is None:
        def is_executable(candidate):
            return os.path.isfile(candidate) and os.access(candidate, os.X_OK)
    for folder in path.split(":"):
        candidate = os.path.join(folder or ".", name)
        if is_executable(candidate):
            return candidate
    return None


def group_names(gids, name_of=None):
    """Names of the process's groups (what ``id -nG`` prints); a group without a name by its number."""
    if name_of is None:
        import grp  # pylint: disable=import-outside-toplevel  # POSIX only; hosts are Linux

        def name_of(gid):
            return grp.getgrgid(gid).gr_name
    names = []
    for gid in gids:
        try:
            names.append(name_of(gid))
        except KeyError:
            names.append(str(gid))
    return names


# The module's work on the host (``module``: its AnsibleModule, or box_module's stand-in).
def image_present(module, docker, label):
    """True when Docker holds an image with ``label`` (False when Docker cannot be asked)."""
    if not docker:
        return False
    rc, out, dummy = module.run_command([docker, "image", "ls", "--quiet", "--filter", "label=%s" % label])
    return rc == 0 and bool(out.strip())


# A wedged dockerd (a hung mount under its root, a stuck containerd) never answers `docker info`,
# which then waits forever: the checks would hang with it.
DOCKER_INFO_LIMIT_S = 60


def bounded(argv, module):
    """argv run under coreutils' timeout (TERM at DOCKER_INFO_LIMIT_S, KILL 5 s later; exit 124 or
    137 then), or as it is where there is no timeout program."""
    limiter = module.get_bin_path("timeout", required=False)
    if not limiter:
        return list(argv)
    return [limiter, "--kill-after=5", str(DOCKER_INFO_LIMIT_S)] + list(argv)


def ask_docker(module, docker, container, user, wait=0, clock=time.monotonic, sleep=time.sleep):
    """The daemon's answer, the own container's state and the user's groups (see RETURN: docker).
    ``wait``: seconds to keep asking, once a second, while the daemon does not answer."""
    deadline = clock() + max(0, wait)
    while True:
        if docker:
            argv = bounded([docker, "info", "--format", "{{json .}}"], module)
            rc, out, err = module.run_command(argv)
            if rc in (124, 137) and argv[0] != docker:
                rc, err = 1, ("docker info did not answer within %d s: the Docker daemon hangs "
                              "(systemctl status docker; journalctl -u docker)" % DOCKER_INFO_LIMIT_S)
        else:
            rc, out, err = 127, "", "docker is not installed (not on PATH)"
        answer = docker_info_answer(rc, out, err)
        if answer["ok"] or answer.get("engine") == "podman" or not docker or clock() + 1 > deadline:
            break
        sleep(1)
    if answer["ok"]:
        path = dockerd_path()
        answer["gpu_hook"] = find_on_path(GPU_HOOK, path) or (
            find_on_path(CDI_HOOK, path) if nvidia_cdi_spec(answer.get("cdi_spec_dirs") or []) else None)
    # Which dockerd runs (whether Docker answers or not): its program and the daemon.json it read.
    dockerd = running_dockerd()
    answer["dockerd"] = {"exe": dockerd["exe"], "config_file": dockerd["config_file"]} if dockerd else None
    answer["own_container_running"] = False
    if answer["ok"] and container:
        rc, out, dummy = module.run_command([docker, "container", "inspect", "--format", "{{.State.Running}}",
                                             container])
        answer["own_container_running"] = rc == 0 and out.strip() == "true"
    egid = os.getegid()  # first, as `id -nG` prints them
    answer["groups"] = None if user == "root" else group_names([egid] + [g for g in os.getgroups() if g != egid])
    return answer


def effective_user(geteuid=os.geteuid):
    """The name of the user the checks run as: the effective uid's, not $USER or $LOGNAME, which
    `su` to root keeps from the login (and getpass reads first)."""
    uid = geteuid()
    try:
        import pwd  # pylint: disable=import-outside-toplevel
        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return "root" if uid == 0 else str(uid)


def read_host(module):
    """host_resources' answer, ended with module.exit_json."""
    p = module.params
    user = effective_user()
    docker = module.get_bin_path("docker", required=False)
    extra = {}
    if p["docker"]:
        extra["docker"] = ask_docker(module, docker, p["docker_container"], user, p["docker_wait"])
    requests = []
    for request in p["paths"]:
        path = request["path"]
        if request["docker_root"]:
            path = (extra.get("docker") or {}).get("root_dir") or DOCKER_ROOT
        need, why = weights_need_gib(request)
        if request["present_image_label"] and image_present(module, docker, request["present_image_label"]):
            need, why = 0, "image present"
        requests.append({"name": request["name"], "path": path, "need_gib": need, "in_place": why})
    filesystems = disk_budget(requests, os.path.exists, device_id, statvfs_free_bytes)
    try:
        with open("/proc/meminfo") as handle:
            memory = parse_meminfo(handle.read())
    except (IOError, OSError):
        memory = None
    ports = []
    for port, address in [(port, p["address"]) for port in p["ports"]] + [(port, "127.0.0.1")
                                                                          for port in p.get("loopback_ports") or []]:
        free, why = port_free(port, address)
        ports.append({"port": port, "free": free, "why": why})
    tools = find_tools(p["tools"], lambda name: module.get_bin_path(name, required=False))
    if p["gpus"] is not None:
        try:
            extra["gpu_info"] = read_gpu_info(SoftFail(module), p["gpus"]["nvidia_smi"], p["gpus"]["gpus"],
                                              p["gpus"]["p2p_gpus"])
        except ModuleFailed as failed:
            extra["gpu_info"] = dict(failed.result, failed=True)
    module.exit_json(changed=False, filesystems=filesystems, memory_available_mib=memory,
                     ports=ports, tools=tools, system=platform.system(),
                     architecture=platform.machine(), user=user, python=sys.executable,
                     python_requests=importlib.util.find_spec("requests") is not None, **extra)


def on_box(params):
    """host_resources' answer, run by the box reader with the host's Python."""
    return box_module.answer(read_host, params)
