# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""gpu_info with p2p_gpus and host_resources with docker and gpus: what the host checks read in one
module run per host, against programs that answer like nvidia-smi and the docker CLI."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import subprocess
import sys

import pytest

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.glm53.tensorfold.plugins.module_utils import host_resources as host_resources_utils
from ansible_collections.glm53.tensorfold.plugins.module_utils import nvidia_smi_command
from ansible_collections.glm53.tensorfold.plugins.modules import gpu_info, gpu_peer_info, host_resources
from ansible_collections.glm53.tensorfold.plugins.plugin_utils import box_reader

CARD = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
# nvidia-smi's answers for a box of two cards, in the shapes of the recordings (driver 580): the
# GPU query without header and units, no compute process, --version, and the topo -p2p matrix
# (header row in ANSI underline, then the legend).
FAKE_SMI = r"""#!/bin/sh
case "$1" in
--query-gpu=*)
  echo "0, GPU-51d00000-0000-4000-8000-000000000001, %(card)s, 00000000:01:00.0, 97887, 2, 97885, 12.0, 400.00, 580.95.05"
  echo "1, GPU-51d00001-0000-4000-8000-000000000002, %(card)s, 00000000:02:00.0, 97887, 2, 97885, 12.0, 400.00, 580.95.05";;
--query-compute-apps=*) ;;
--version) printf 'NVIDIA-SMI version  : 580.95.05\nDRIVER version      : 580.95.05\nCUDA Version        : 13.0\n';;
topo)
  %(topo)s
  if [ "$3" = w ]; then s=%(write)s; else s=OK; fi
  printf ' \t\033[4mGPU0\tGPU1\t\033[0m\n GPU0\tX\t%%s\t\n GPU1\t%%s\tX\t\n\nLegend:\n\n  X    = Self\n' "$s" "$s"
  printf '  OK   = Status Ok\n  CNS  = Chipset not supported\n  NS   = Not supported\n  U    = Unknown\n';;
esac
"""


@pytest.fixture
def smi(tmp_path):
    """make(write=STATUS, topo_fails=False) -> the path of a fake nvidia-smi for two cards."""
    def make(write="OK", topo_fails=False):
        path = tmp_path / ("nvidia-smi-%s-%s" % (write, topo_fails))
        topo = "echo 'Unable to determine the device handle: Unknown Error' >&2; exit 3" if topo_fails else ":"
        path.write_text(FAKE_SMI % {"card": CARD, "topo": topo, "write": write})
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return str(path)
    return make


def test_gpu_info_reads_peer_to_peer_in_the_same_run(smi, run_module):
    binary = smi()
    result = run_module(gpu_info, nvidia_smi=binary, p2p_gpus=[0, 1])
    assert not result.get("failed")
    assert [g["index"] for g in result["gpus"]] == [0, 1]
    assert result["peer"]["peer_ok"] and result["peer"]["read"] == {"0-1": "OK", "1-0": "OK"}
    # the same answer gpu_peer_info gives alone
    alone = run_module(gpu_peer_info, nvidia_smi=binary, gpus=[0, 1])
    assert alone["read"] == result["peer"]["read"] and alone["write"] == result["peer"]["write"]


def test_gpu_info_without_p2p_gpus_asks_nothing_about_peers(smi, run_module):
    result = run_module(gpu_info, nvidia_smi=smi())
    assert "peer" not in result and not result.get("failed")


def test_missing_gpus_skip_peer_to_peer_and_a_broken_pair_is_a_warning_not_a_failure(smi, run_module):
    skipped = run_module(gpu_info, nvidia_smi=smi(), p2p_gpus=[0, 2])
    assert skipped["peer"]["skipped"] and "2" in skipped["peer"]["msg"] and not skipped.get("failed")
    broken = run_module(gpu_info, nvidia_smi=smi(write="CNS"), p2p_gpus=[0, 1])
    assert not broken.get("failed") and broken["peer"]["peer_ok"] is False and broken["peer"]["warning"]


def test_an_unreadable_matrix_fails_gpu_peer_info_but_not_gpu_info(smi, run_module):
    broken = smi(topo_fails=True)
    result = run_module(gpu_info, nvidia_smi=broken, p2p_gpus=[0, 1])
    assert not result.get("failed") and len(result["gpus"]) == 2
    assert result["peer"]["failed"] and "Unknown Error" in result["peer"]["msg"]
    alone = run_module(gpu_peer_info, nvidia_smi=broken, gpus=[0, 1])
    assert alone["failed"] and alone["rc"] == 3


def fake_docker(tmp_path, monkeypatch, info_rc=0, info=None, running="true"):
    """A docker CLI on PATH that answers `info`, `container inspect` and `image ls`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    info_out = tmp_path / "info.json"
    info_out.write_text(json.dumps(info if info is not None else
                                   {"DockerRootDir": str(tmp_path / "docker-root"),
                                    "Runtimes": {"runc": {}, "nvidia": {}}}))
    script = bin_dir / "docker"
    script.write_text("#!/bin/sh\n"
                      "case \"$1\" in\n"
                      "info) [ %d = 0 ] || { echo 'Cannot connect to the Docker daemon' >&2; exit 1; }; cat %s;;\n"
                      "container) echo %s;;\n"
                      "image) ;;\n"
                      "esac\n" % (info_rc, info_out, running))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ.get("PATH", "")))


def test_host_resources_asks_docker_once_for_everything_the_checks_need(tmp_path, monkeypatch, run_module):
    fake_docker(tmp_path, monkeypatch)
    result = run_module(host_resources, docker=True, docker_container="glm53-tensorfold",
                        paths=[{"name": "image build", "docker_root": True, "need_gib": 0.001}])
    docker = result["docker"]
    assert docker["ok"] and docker["error"] == "" and docker["runtimes"] == ["nvidia", "runc"]
    assert docker["root_dir"] == str(tmp_path / "docker-root") and docker["own_container_running"]
    # the image build path is Docker's own root folder (its nearest existing parent here)
    assert result["filesystems"][0]["paths"][0]["path"] == str(tmp_path / "docker-root")
    assert (docker["groups"] is None) == (result["user"] == "root")
    assert result["python"] == sys.executable and result["python_requests"] is True  # the units' venv has it


def test_host_resources_says_when_its_python_lacks_requests(tmp_path, monkeypatch, run_module):
    fake_docker(tmp_path, monkeypatch)
    monkeypatch.setitem(sys.modules, "requests", None)  # what find_spec reports for a library that is not there
    result = run_module(host_resources, docker=True)
    assert result["python_requests"] is False


def test_host_resources_reports_a_daemon_that_does_not_answer(tmp_path, monkeypatch, run_module):
    fake_docker(tmp_path, monkeypatch, info_rc=1)
    result = run_module(host_resources, docker=True, docker_container="glm53-tensorfold",
                        paths=[{"name": "image build", "docker_root": True, "need_gib": 0.001}])
    assert result["docker"] == dict(result["docker"], ok=False, error="Cannot connect to the Docker daemon",
                                    runtimes=[], root_dir="/var/lib/docker", own_container_running=False)
    assert result["filesystems"][0]["paths"][0]["path"] == "/var/lib/docker"


def test_host_resources_without_docker_returns_no_docker_answer(run_module):
    result = run_module(host_resources, tools=["sh"])
    assert "docker" not in result and result["tools"]["sh"]


def test_host_resources_reads_the_gpus_in_the_same_run_as_gpu_info_does(smi, run_module):
    binary = smi(write="CNS")
    result = run_module(host_resources, tools=["sh"], gpus={"nvidia_smi": binary, "p2p_gpus": [0, 1]})
    assert not result.get("failed") and result["tools"]["sh"]
    alone = run_module(gpu_info, nvidia_smi=binary, p2p_gpus=[0, 1])
    alone.pop("changed", None)
    alone.pop("warnings", None)
    assert result["gpu_info"] == dict((key, alone[key]) for key in result["gpu_info"])
    assert sorted(result["gpu_info"]) == ["cuda_version", "driver_version", "gpus", "peer"]
    assert result["gpu_info"]["peer"]["peer_ok"] is False  # the warning, not a failure


def test_host_resources_returns_gpus_that_cannot_be_read_without_failing(tmp_path, run_module):
    result = run_module(host_resources, tools=["sh"], gpus={"nvidia_smi": str(tmp_path / "missing-nvidia-smi")})
    assert not result.get("failed") and result["tools"]["sh"]
    assert result["gpu_info"]["failed"] is True and "nvidia-smi not found" in result["gpu_info"]["msg"]
    assert "gpus" not in result["gpu_info"]


def test_host_resources_without_gpus_asks_no_gpu(run_module):
    assert "gpu_info" not in run_module(host_resources, tools=["sh"])


# The box reader (plugin_utils/box_reader.py) runs the same work with the host's Python and no
# AnsiballZ; here in a Python that cannot import Ansible (-I -S), so an import it does not carry fails.
def box_reader_answer(modules, function, spec, **args):
    params = ArgumentSpecValidator(spec).validate(args).validated_parameters
    proc = subprocess.run([sys.executable, "-I", "-S", "-"], input=box_reader.program(modules, function, params).encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return box_reader.parse(proc.stdout.decode())


@pytest.mark.parametrize("write", ["OK", "CNS"])
def test_gpu_info_answers_alike_from_the_module_and_the_box_reader(smi, run_module, write):
    binary = smi(write=write)
    module = run_module(gpu_info, nvidia_smi=binary, p2p_gpus=[0, 1])
    box = box_reader_answer(nvidia_smi_command.READER_MODULES, "gpu_info_on_box", gpu_info.ARGUMENT_SPEC,
                            nvidia_smi=binary, p2p_gpus=[0, 1])
    warnings = box.pop("warnings", [])
    assert box == module and box["gpus"]
    assert bool(warnings) == (write != "OK")  # a pair that cannot write to each other is a warning, as the module's


def test_a_missing_nvidia_smi_fails_alike_from_the_module_and_the_box_reader(tmp_path, run_module):
    missing = str(tmp_path / "missing-nvidia-smi")
    module = run_module(gpu_info, nvidia_smi=missing)
    box = box_reader_answer(nvidia_smi_command.READER_MODULES, "gpu_info_on_box", gpu_info.ARGUMENT_SPEC, nvidia_smi=missing)
    assert box == module and box["failed"] is True and "nvidia-smi not found" in box["msg"]


def test_host_resources_answers_alike_from_the_module_and_the_box_reader(tmp_path, monkeypatch, smi, run_module):
    fake_docker(tmp_path, monkeypatch)
    args = dict(docker=True, docker_container="glm53-tensorfold", tools=["sh", "no-such-tool"], ports=[1],
                paths=[{"name": "image build", "docker_root": True, "need_gib": 0.001}],
                gpus={"nvidia_smi": smi(), "p2p_gpus": [0, 1]})
    module = run_module(host_resources, **args)
    box = box_reader_answer(host_resources_utils.READER_MODULES, "on_box", host_resources.ARGUMENT_SPEC, **args)
    assert box.pop("python_requests") is False  # this Python sees no site-packages; the module's does
    module.pop("python_requests")
    assert box.pop("memory_available_mib") > 0 and module.pop("memory_available_mib") > 0  # read a moment apart
    assert box == module and box["docker"]["ok"] and box["gpu_info"]["gpus"]


def test_loopback_ports_are_tried_on_127_0_0_1_whatever_the_address(run_module):
    # The ranks' control link listens on 127.0.0.1: a listener there takes the port even when the
    # API's address is another one (here an address no socket can bind, so only loopback tells).
    import socket
    taken = socket.socket()
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        answer = run_module(host_resources, ports=[port], address="127.0.0.2", loopback_ports=[port])
    finally:
        taken.close()
    assert answer["ports"][0]["free"] is True  # 127.0.0.2:port is another socket address
    assert answer["ports"][1] == {"port": port, "free": False, "why": "port %d is in use on 127.0.0.1" % port}
