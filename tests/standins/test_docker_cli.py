# -*- coding: utf-8 -*-
"""The docker CLI stand-in answers `docker info --format '{{json .}}'` as a daemon with the nvidia runtime."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess

DOCKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "docker-cli", "docker")


def test_info_is_docker_28s_shape_with_the_nvidia_runtime_and_can_be_switched():
    done = subprocess.run([DOCKER, "info", "--format", "{{json .}}"], capture_output=True, text=True, check=False)
    info = json.loads(done.stdout)
    assert done.returncode == 0 and sorted(info["Runtimes"]) == ["io.containerd.runc.v2", "nvidia", "runc"]
    other = subprocess.run([DOCKER, "info"], capture_output=True, text=True, check=False,
                           env=dict(os.environ, STANDIN_DOCKER_INFO='{"Runtimes": {"runc": {}}}'))
    assert json.loads(other.stdout) == {"Runtimes": {"runc": {}}}
    assert subprocess.run([DOCKER, "ps"], capture_output=True, check=False).returncode == 1


def test_run_lists_the_gpus_or_fails_as_docker_does():
    argv = [DOCKER, "run", "--rm", "--gpus", "all", "ubuntu:24.04", "nvidia-smi", "-L"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.startswith("GPU 0: ")
    pull = subprocess.run(argv, capture_output=True, text=True, check=False, env=dict(os.environ, STANDIN_DOCKER_RUN="pull-fails"))
    assert pull.returncode == 125 and pull.stderr.startswith("Unable to find image 'ubuntu:24.04' locally\n")
    driver = subprocess.run(argv, capture_output=True, text=True, check=False,
                            env=dict(os.environ, STANDIN_DOCKER_RUN="no-gpu-driver"))
    assert driver.returncode == 125 and "could not select device driver" in driver.stderr
