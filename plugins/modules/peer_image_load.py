#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: peer_image_load
short_description: Load an image archive another host serves with hf_peer_serve straight into Docker
version_added: 0.2.0
description:
  - Streams the image archive (C(docker save) output) that M(glm53.tensorfold.hf_peer_serve)
    serves under C(/files/NAME) on another host of the run into this host's Docker Engine as it
    arrives (C(POST /images/load) on the engine's socket). The archive is never written to this
    host's disk, nor read back to be loaded.
  - Sends the run's secret as a Bearer token and hashes the bytes on a thread of their own. The
    engine loads the archive only once its size and sha256 are the ones given. Until then the body
    of the load is left open, and a wrong or broken transfer closes it unfinished, so the engine
    discards it, and is fetched again, O(attempts) times in all.
  - Then O(image) must name an image of O(identity), the build host's. An image's id cannot be
    compared between hosts whose Docker Engines use different image stores (the graphdriver
    store's id is the digest of the image's configuration, the containerd store's, the default of
    a fresh Docker Engine 29, the digest of its manifest), so the check compares what both stores
    read from the configuration - the digest of every layer, which the engine checked as it loaded
    them, the platform and how the image runs (the M(glm53.tensorfold.image_identity) filter).
  - Waits up to O(wait) seconds for the server to accept the first connection (it starts in the
    same run). Connects straight to the address in O(url), past any proxy of the environment.
  - Leaves a host where O(image) already names an image of O(identity) alone.
author:
  - glm53.tensorfold contributors (@glm53)
extends_documentation_fragment:
  - glm53.tensorfold.peer_copy
options:
  image:
    description: The reference (C(NAME:TAG)) the archive tags, checked after the load.
    type: str
    required: true
  identity:
    description:
      - The identity (C(sha256:...)) the image must have, the build host's image's
        (C(images[0] | glm53.tensorfold.image_identity) of M(community.docker.docker_image_info) there).
    type: str
    required: true
  docker_host:
    description: The Docker Engine's API socket (C(unix://) only).
    type: str
    default: unix:///var/run/docker.sock
  load_timeout:
    description: Seconds the engine may take to read a piece of the archive or to answer the load.
    type: int
    default: 1800
attributes:
  check_mode:
    support: full
    description: Says whether the image would be loaded (O(image) names another image or none); fetches nothing.
"""

EXAMPLES = r"""
- name: Load the engine image from the build host
  glm53.tensorfold.peer_image_load:
    url: http://10.0.0.11:18471/files/3f2a9c1d.tar
    size: 8123456512
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    secret: "{{ hostvars[build_host].move_secret }}"
    image: glm53/tensorfold-native:3f2a9c1d
    identity: "{{ hostvars[build_host].build_image.images[0] | glm53.tensorfold.image_identity }}"
"""

RETURN = r"""
image_id:
  description: The id of the image O(image) names after the run, on this host's Docker (its image store's kind of id).
  returned: success
  type: str
identity:
  description: The identity of that image (O(identity)).
  returned: success
  type: str
loaded:
  description: What the engine said it loaded (references, or ids of untagged images).
  returned: when loaded
  type: list
  elements: str
bytes:
  description: Bytes received in the fetch that was loaded (0 when the image was already there).
  returned: success
  type: int
attempts:
  description: Fetches made (0 when the image was already there).
  returned: success
  type: int
seconds:
  description: How long the fetch took, waiting for the server included.
  returned: success
  type: float
"""

import re
import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer, image_load
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem

FETCH_TODO = hf_peer.REACH_TODO + ", then run again."
LOAD_TODO = ("Check the Docker Engine on this host (docker info; free space under its data root) and its log, "
             "then run again.")


def main():
    module = AnsibleModule(
        argument_spec=dict(hf_peer.PEER_COPY_SPEC, image=dict(type="str", required=True),
                           identity=dict(type="str", required=True),
                           docker_host=dict(type="str", default="unix:///var/run/docker.sock"),
                           load_timeout=dict(type="int", default=1800)),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host_label"] or socket.gethostname()
    wrong = hf_peer.peer_copy_problems(params)
    if not re.match(r"^sha256:[0-9a-f]{64}$", params["identity"]):
        wrong.append("identity must be sha256: and 64 lowercase hex digits (the image_identity filter's)")
    if not params["docker_host"].startswith("unix://"):
        wrong.append("docker_host must be a unix:// socket")
    if params["load_timeout"] < 1:
        wrong.append("load_timeout must be 1 or more")
    if wrong:
        module.fail_json(msg=problem("E_SETTINGS", host, "; ".join(wrong)), code="E_SETTINGS")
    docker_socket = image_load.socket_path(params["docker_host"])
    try:
        if module.check_mode:
            have_id, have = image_load.named_image(docker_socket, params["image"], params["timeout"])
            module.exit_json(changed=have != params["identity"], image_id=have_id, identity=params["identity"],
                             bytes=0, attempts=0, seconds=0.0)
        result = hf_peer.load_image(params["url"], params["size"], params["sha256"], params["secret"], docker_socket,
                                    params["image"], params["identity"], timeout=params["timeout"], wait=params["wait"],
                                    attempts=params["attempts"], load_timeout=params["load_timeout"])
    except hf_peer.FetchError as err:
        module.fail_json(msg=problem("E_DOWNLOAD", host, err.what, FETCH_TODO), code="E_DOWNLOAD")
    except image_load.LoadError as err:
        module.fail_json(msg=problem("E_IMAGE", host, err.what, LOAD_TODO), code="E_IMAGE")
    except (IOError, OSError) as err:
        module.fail_json(msg=problem("E_DOCKER", host, "cannot reach the Docker Engine at %s: %s"
                                     % (params["docker_host"], err)), code="E_DOCKER")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
