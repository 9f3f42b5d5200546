#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_resources
short_description: Read free disk per filesystem, available memory, free ports and tools of a host
version_added: 0.1.0
description:
  - For each path in O(paths), finds the filesystem it would land on (the path itself or its
    nearest existing parent) and adds up what the paths on one filesystem still need, since they
    share its free space.
  - Asks only for what is still missing. A snapshot path with C(state_dir) and C(revision) needs
    only the bytes of files whose verification record (kept by M(glm53.tensorfold.hf_snapshot))
    no longer holds, so weights verified in place need none. A path with C(present_image_label)
    needs nothing when Docker already holds an image with that label.
  - Tries to bind each port in O(ports) on O(address), and each in O(loopback_ports) on 127.0.0.1, as
    the server would; a port something listens on reads as not free. The socket is closed at once.
  - Reads C(MemAvailable) from C(/proc/meminfo), looks up each tool in O(tools) on E(PATH), and
    says which system, architecture and user it ran as (cheaper than gathering facts).
  - Only reads; nothing on the host changes, so check mode gives the same answer.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  paths:
    description: Paths that will hold data, with what each needs.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: What the path is for (used in messages).
        type: str
        required: true
      path:
        description: The path; it need not exist yet. Required unless O(paths[].docker_root) is set.
        type: path
      docker_root:
        description:
          - The path is Docker's root folder, as the daemon reports it (C(DockerRootDir)), else
            C(/var/lib/docker). Needs O(docker).
        type: bool
        default: false
      need_gib:
        description: Free space the path needs when nothing of it is in place, in GiB.
        type: float
        required: true
      state_dir:
        description: The hf_snapshot state folder of a snapshot at this path (its listing and verification records).
        type: path
      revision:
        description: The pinned commit of that snapshot.
        type: str
      present_image_label:
        description: A Docker image label; when an image with it is present the path needs nothing.
        type: str
  ports:
    description: TCP ports that must be free.
    type: list
    elements: int
    default: []
  address:
    description: The address to bind the ports on.
    type: str
    default: 0.0.0.0
  loopback_ports:
    description:
      - TCP ports that must be free on 127.0.0.1, whatever O(address) is (the ranks' control link listens
        there). A listener on 127.0.0.1 or on every address takes such a port.
    type: list
    elements: int
    default: []
  tools:
    description: Programs to look up on E(PATH).
    type: list
    elements: str
    default: []
  docker:
    description:
      - Also ask the Docker daemon (C(docker info)) whether it answers, its runtimes and root
        folder; whether O(docker_container) runs; and the groups of the user, in the same module
        run (the host checks make one call here per host, not four).
    type: bool
    default: false
  docker_container:
    description: A container whose running state RV(docker) reports (C(own_container_running)).
    type: str
  docker_wait:
    description:
      - With O(docker), ask C(docker info) again once a second for up to this many seconds while the
        daemon does not answer (a Docker just restarted), instead of reporting it at once.
    type: int
    default: 0
  gpus:
    description:
      - Also read the GPUs, the driver and peer-to-peer in the same module run, as
        M(glm53.tensorfold.gpu_info) does with these options, so the host checks need one module run per host.
      - The answer is RV(gpu_info); a GPU read that fails does not fail this module but returns
        C(failed) with its message.
    type: dict
    suboptions:
      nvidia_smi:
        description: The C(nvidia-smi) to run, as in M(glm53.tensorfold.gpu_info).
        type: path
      gpus:
        description: GPU indices to return, in this order; every GPU when empty.
        type: list
        elements: int
        default: []
      p2p_gpus:
        description: Also read peer-to-peer between these GPU indices.
        type: list
        elements: int
        default: []
extends_documentation_fragment:
  - glm53.tensorfold.read_only
  - glm53.tensorfold.read_only.box_reader
"""

EXAMPLES = r"""
- name: Check disk, memory, ports and tools for the recipe
  glm53.tensorfold.host_resources:
    paths:
      - {name: checkpoint, path: /srv/glm53/model, need_gib: 180}
      - {name: drafter, path: /srv/glm53/drafter, need_gib: 10}
      - {name: image build, path: /var/lib/docker, need_gib: 40}
    ports: [8020]
    loopback_ports: [29583, 29584]
    tools: [curl, flock, tar]
  register: resources
"""

RETURN = r"""
read_with:
  description: Which answered, C(box reader) (the host's Python ran the module's code, no AnsiballZ) or C(module).
  returned: when M(glm53.tensorfold.gpu_host_verdict) reads the host
  type: str
  sample: box reader
filesystems:
  description: One entry per filesystem the paths land on, in the order first met.
  returned: always
  type: list
  elements: dict
  contains:
    mount:
      description: The top of the filesystem.
      type: str
      sample: /srv
    free_gib:
      description: Free space (for unprivileged writes), GiB, one decimal.
      type: float
      sample: 512.3
    need_gib:
      description: What the paths on this filesystem need together, GiB.
      type: float
      sample: 190
    ok:
      description: Whether free_gib covers need_gib.
      type: bool
    paths:
      description: >-
        The paths on this filesystem, each with C(name), C(path), C(lands_on), C(need_gib) (what it
        still needs) and C(in_place) (why it needs less than its default, or empty).
      type: list
      elements: dict
memory_available_mib:
  description: MemAvailable in MiB (null when the kernel does not report it).
  returned: always
  type: int
  sample: 61234
ports:
  description: One entry per port, with C(port), C(free) and C(why) (empty when free).
  returned: always
  type: list
  elements: dict
  sample: [{"port": 8020, "free": false, "why": "port 8020 is in use on 0.0.0.0"}]
system:
  description: The operating system's name, as Python's platform.system() gives it.
  returned: always
  type: str
  sample: Linux
architecture:
  description: The machine's architecture, as platform.machine() gives it.
  returned: always
  type: str
  sample: x86_64
user:
  description: The user the module ran as.
  returned: always
  type: str
  sample: root
python:
  description: The Python the module ran with, the one Ansible runs modules with on this host.
  returned: always
  type: str
  sample: /usr/bin/python3
python_requests:
  description: Whether that Python can import C(requests), which Ansible's Docker modules (community.docker) import on the host.
  returned: always
  type: bool
  sample: true
tools:
  description: Each tool and where it was found (null when missing).
  returned: always
  type: dict
  sample: {"curl": "/usr/bin/curl", "hf": null}
docker:
  description:
    - What the Docker daemon said. C(ok) (it answered), C(error) (the first line of its error),
      C(runtimes) (names), C(root_dir), C(own_container_running) (O(docker_container) runs),
      C(groups) (the user's groups; null for root). C(engine) is C(podman) when C(docker) is Podman
      (podman-docker), whose answer is no Docker daemon's (C(ok) false, C(error) names it).
      C(gpu_hook) (when the daemon answers) is where dockerd finds C(nvidia-container-runtime-hook),
      which C(docker run --gpus) needs (or C(nvidia-cdi-hook) when C(cdi_spec_dirs) says CDI is on and holds a spec for
      C(nvidia.com/gpu)), null when
      it finds neither. C(dockerd) is the running dockerd (whether it answers or not), C(exe) (its
      program, under C(/snap/) for Docker's snap) and C(config_file) (the daemon.json it read, its
      C(--config-file) or C(/etc/docker/daemon.json)), null when none runs.
  returned: when O(docker) is set
  type: dict
  sample: {"ok": true, "error": "", "runtimes": ["nvidia", "runc"], "root_dir": "/var/lib/docker",
           "own_container_running": false, "groups": null}
gpu_info:
  description:
    - With O(gpus), the answer of M(glm53.tensorfold.gpu_info) for those options (C(gpus), C(driver_version),
      C(cuda_version), C(peer), C(unreachable)), or C(failed) and C(msg) when the GPUs cannot be read.
  returned: with O(gpus)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import host_resources as res

ARGUMENT_SPEC = dict(
    paths=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True),
        path=dict(type="path"),
        docker_root=dict(type="bool", default=False),
        need_gib=dict(type="float", required=True),
        state_dir=dict(type="path"),
        revision=dict(type="str"),
        present_image_label=dict(type="str"),
    ), required_one_of=[("path", "docker_root")]),
    ports=dict(type="list", elements="int", default=[]),
    address=dict(type="str", default="0.0.0.0"),
    loopback_ports=dict(type="list", elements="int", default=[]),
    tools=dict(type="list", elements="str", default=[]),
    docker=dict(type="bool", default=False),
    docker_container=dict(type="str"),
    docker_wait=dict(type="int", default=0),
    gpus=dict(type="dict", options=dict(
        nvidia_smi=dict(type="path"),
        gpus=dict(type="list", elements="int", default=[]),
        p2p_gpus=dict(type="list", elements="int", default=[]),
    )),
)


def main():
    # Its caller's action (gpu_host_verdict) runs the same read_host on the host without this module
    # where the connection pipelines (plugin_utils/box_reader.py).
    res.read_host(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
