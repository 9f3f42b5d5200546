#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_peer_serve
short_description: Serve verified Hub snapshots (and single files) read-only to peer hosts for a while
description:
  - Serves snapshots that M(glm53.tensorfold.hf_snapshot) fetched and verified, over HTTP, with
    the part of the Hub's API that hf_snapshot uses (tree listing, resolve with Range), so peers
    copy them with I(endpoint=http://SEED:PORT) and verify every file with the same checksums.
  - Refuses to start unless every file's verification record still holds. Writes nothing.
  - With O(files), it also serves single files under C(/files/NAME) (the engine image's archive,
    from its build host); M(glm53.tensorfold.peer_fetch) copies one and checks its size and sha256.
  - Every request must carry the run's secret as a Bearer token in its C(Authorization) header
    (what M(glm53.tensorfold.hf_snapshot) sends as its token); any other request gets 401 and no
    byte. The secret is read from I(secret_file), a file only its owner may read, so it is in no
    argument, process list or log.
  - Runs until I(stop_file) exists, I(idle_timeout) seconds pass without a request or a byte
    sent (the run that needed it was killed), or I(lifetime) seconds pass; meant for C(async)
    with C(poll=0).
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
options:
  repos:
    description:
      - The snapshots to serve, each a dict with C(repo_id), C(revision) (the pinned commit),
        C(local_dir) (its folder) and C(state_dir) (its hf_snapshot state folder); other keys are ignored.
      - O(repos) or O(files) must name something to serve.
    type: list
    elements: dict
    default: []
  files:
    description:
      - Single files to serve, each a dict with C(name) (letters, digits, C(.), C(_) and C(-); the
        URL is C(/files/NAME)) and C(path) (the file).
    type: list
    elements: dict
    default: []
  bind:
    description: The address the peers reach this host at (an IP address or a name that resolves to one of its own).
    type: str
    required: true
  secret_file:
    description: A file of mode 0600 whose first line is the run's secret (at least 16 characters).
    type: path
    required: true
  idle_timeout:
    description: Stop after this many seconds without a request or a byte sent; 0 never.
    type: int
    default: 120
  port:
    description: TCP port.
    type: int
    required: true
  stop_file:
    description: The server stops once this file exists.
    type: path
    required: true
  lifetime:
    description: The server stops after this many seconds at most.
    type: int
    default: 86400
"""

EXAMPLES = r"""
- name: Serve the seed's verified copy while peers copy it
  glm53.tensorfold.hf_peer_serve:
    repos:
      - repo_id: Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold
        revision: 078455ffe6472f9a52fbc1139f58b9db2881b25c
        local_dir: /srv/glm53/model
        state_dir: /srv/glm53/.state/weights/model
    bind: 10.0.0.11
    port: 18470
    secret_file: /srv/glm53/.state/weights/peer-serve.secret
    stop_file: /srv/glm53/.state/weights/peer-serve.stop
  async: 86400
  poll: 0
"""

RETURN = r"""
requests:
  description: HTTP requests served.
  returned: success
  type: int
bytes:
  description: File bytes served.
  returned: success
  type: int
seconds:
  description: How long the server ran.
  returned: success
  type: float
refused:
  description: Requests refused for want of the run's secret.
  returned: success
  type: int
stopped:
  description: Why it stopped (C(stop file), C(idle) or C(lifetime)).
  returned: success
  type: str
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repos=dict(type="list", elements="dict", default=[]),
            files=dict(type="list", elements="dict", default=[]),
            bind=dict(type="str", required=True),
            port=dict(type="int", required=True),
            secret_file=dict(type="path", required=True),
            stop_file=dict(type="path", required=True),
            lifetime=dict(type="int", default=86400),
            idle_timeout=dict(type="int", default=120),
        ),
        supports_check_mode=False,
    )
    params = module.params
    try:
        secret = hf_peer.read_secret(params["secret_file"])
        stats = hf_peer.serve(params["repos"], params["bind"], params["port"], params["stop_file"], params["lifetime"],
                              secret, idle_timeout=params["idle_timeout"], files=params["files"])
    except (IOError, OSError, ValueError, KeyError) as err:
        module.fail_json(msg=problem("E_DOWNLOAD", socket.gethostname(), "cannot serve to peers: %s" % err), code="E_DOWNLOAD")
    module.exit_json(changed=False, **stats)


if __name__ == "__main__":
    main()
