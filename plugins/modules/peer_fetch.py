#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: peer_fetch
short_description: Copy one file another host serves with hf_peer_serve, checked by size and sha256
version_added: 0.2.0
description:
  - Fetches the file that M(glm53.tensorfold.hf_peer_serve) serves under C(/files/NAME) on another
    host of the run (the engine image's archive, from its build host), straight from that host; the
    controller carries no byte of it.
  - Sends the run's secret as a Bearer token. Hashes the bytes on a thread of its own while they
    arrive, so the file is never read back; keeps it only when its size and sha256 are the ones
    given, else fetches it again, O(attempts) times in all. The file appears at O(dest) whole or
    not at all.
  - Waits up to O(wait) seconds for the server to accept the first connection (it starts in the
    same run). Connects straight to the address in O(url), past any proxy of the environment.
  - Leaves a file that already holds those bytes alone.
author:
  - glm53.tensorfold contributors (@glm53)
extends_documentation_fragment:
  - glm53.tensorfold.peer_copy
options:
  dest:
    description: Where the file goes; its folder is made when missing.
    type: path
    required: true
  mode:
    description: The file's mode once in place.
    type: raw
    default: "0644"
attributes:
  check_mode:
    support: full
    description: Says whether the file would be fetched (it is missing or differs); fetches nothing.
"""

EXAMPLES = r"""
- name: Copy the image archive from the build host
  glm53.tensorfold.peer_fetch:
    url: http://10.0.0.11:18471/files/3f2a9c1d.tar
    dest: /srv/glm53/.state/image/archive/3f2a9c1d.tar
    size: 8123456512
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    secret: "{{ hostvars[build_host].move_secret }}"
"""

RETURN = r"""
bytes:
  description: Bytes received in the fetch that was kept (0 when the file was already there).
  returned: success
  type: int
attempts:
  description: Fetches made (0 when the file was already there).
  returned: success
  type: int
seconds:
  description: How long the fetch took, waiting for the server included.
  returned: success
  type: float
"""

import socket

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import hf_peer
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem

TODO = hf_peer.REACH_TODO + " and has free space, then run again."


def main():
    module = AnsibleModule(
        argument_spec=dict(hf_peer.PEER_COPY_SPEC, dest=dict(type="path", required=True),
                           mode=dict(type="raw", default="0644")),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host_label"] or socket.gethostname()
    wrong = hf_peer.peer_copy_problems(params)
    try:
        mode = int(str(params["mode"]), 8) if not isinstance(params["mode"], int) else params["mode"]
    except ValueError:
        mode = None
        wrong.append("mode must be octal, such as 0644")
    if wrong:
        module.fail_json(msg=problem("E_SETTINGS", host, "; ".join(wrong)), code="E_SETTINGS")
    if module.check_mode:
        module.exit_json(changed=not hf_peer.file_matches(params["dest"], params["size"], params["sha256"]),
                         bytes=0, attempts=0, seconds=0.0)
    try:
        result = hf_peer.fetch_file(params["url"], params["dest"], params["size"], params["sha256"], params["secret"],
                                    timeout=params["timeout"], wait=params["wait"], attempts=params["attempts"], mode=mode)
    except hf_peer.FetchError as err:
        module.fail_json(msg=problem("E_DOWNLOAD", host, err.what, TODO), code="E_DOWNLOAD")
    except (IOError, OSError) as err:
        module.fail_json(msg=problem("E_DOWNLOAD", host, "cannot write %s: %s" % (params["dest"], err), TODO),
                         code="E_DOWNLOAD")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
