#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hf_peer_serve
short_description: Serve verified Hub snapshots read-only to peer hosts for a while
description:
  - Serves snapshots that M(glm53.tensorfold.hf_snapshot) fetched and verified, over HTTP, with
    the part of the Hub's API that hf_snapshot uses (tree listing, resolve with Range), so peers
    copy them with I(endpoint=http://SEED:PORT) and verify every file with the same checksums.
  - Refuses to start unless every file's verification record still holds. Writes nothing.
  - Runs until I(stop_file) exists or I(lifetime) seconds pass; meant for C(async) with C(poll=0).
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
options:
  repos:
    description:
      - The snapshots to serve, each a dict with C(repo_id), C(revision) (the pinned commit),
        C(local_dir) (its folder) and C(state_dir) (its hf_snapshot state folder); other keys are ignored.
    type: list
    elements: dict
    required: true
  bind:
    description: Address to listen on.
    type: str
    default: 0.0.0.0
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
    port: 18470
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
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repos=dict(type="list", elements="dict", required=True),
            bind=dict(type="str", default="0.0.0.0"),
            port=dict(type="int", required=True),
            stop_file=dict(type="path", required=True),
            lifetime=dict(type="int", default=86400),
        ),
        supports_check_mode=False,
    )
    params = module.params
    try:
        stats = hf_peer.serve(params["repos"], params["bind"], params["port"], params["stop_file"], params["lifetime"])
    except (IOError, OSError, ValueError, KeyError) as err:
        module.fail_json(msg="[E_DOWNLOAD] cannot serve the verified copy to peers: %s" % err)
    module.exit_json(changed=False, **stats)


if __name__ == "__main__":
    main()
