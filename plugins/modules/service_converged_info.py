#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: service_converged_info
short_description: Say in one call whether a service box (gateway, Prometheus) is what its last converge left
version_added: 0.3.0
description:
  - The converged fast path of the site gateway and of Prometheus (the glm53.tensorfold.gateway and
    glm53.tensorfold.monitoring roles), like M(glm53.tensorfold.converged_info) for a GPU box.
  - "The parts: C(record) (the record O(record), written by the role after its last successful
    converge, holds RV(fingerprint): the run wants what that converge made, and only its owner can
    read it, since the fingerprint covers secret files), C(files) (every file of
    O(files) holds the content the run would write, or is absent when its content is null) and
    C(service) (the service answers: GET O(probe_url) gives 200, or the unix socket O(probe_socket)
    accepts a connection)."
  - RV(fingerprint) covers each file's path and content (as its sha256; a file marked C(secret) by
    its path and presence only) and O(inputs), so a change in what the run renders (for the
    gateway, the backends this run) is a change.
  - Only reads; it never changes the box, so check mode gives the same answer.
extends_documentation_fragment:
  - glm53.tensorfold.read_only
author:
  - glm53.tensorfold contributors (@glm53)
options:
  record:
    description: "The record of the last successful converge, a JSON file C({\"fingerprint\": ...})."
    type: path
    required: true
  files:
    description: The files the role writes, with the content the run would write.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file on the box.
        type: path
        required: true
      content:
        description: The content the run would write; null means the file must not exist. May hold a secret (never shown).
        type: str
      secret:
        description:
          - The content is a secret (a key file); RV(fingerprint) then covers the file's path and presence only,
            so that the fingerprint, which a C(-v) run shows and the record keeps, cannot be used to test guesses
            of the secret. The content is still compared with the file on the box.
        type: bool
        default: false
  inputs:
    description: Anything else the fingerprint must cover (for the gateway, its servers and those held out).
    type: raw
  probe_url:
    description:
      - A URL on the box that answers 200 while the service runs, for example C(http://127.0.0.1:9090/-/ready).
      - Asked directly, never through a proxy from the environment, with no redirect followed.
    type: str
  probe_socket:
    description: A unix socket that accepts a connection while the service runs (HAProxy's runtime socket).
    type: path
  probe_timeout:
    description: Seconds the probe may take.
    type: float
    default: 2.0
"""

EXAMPLES = r"""
- name: Is Prometheus what its last converge left?
  glm53.tensorfold.service_converged_info:
    record: /var/lib/glm53-tensorfold/prometheus.json
    files:
      - {path: /etc/prometheus/prometheus.yml, content: "{{ lookup('ansible.builtin.template', 'prometheus.yml.j2') }}"}
    probe_url: http://127.0.0.1:9090/-/ready
  register: prometheus_converged

- name: After a converge, record it
  ansible.builtin.copy:
    content: "{{ {'fingerprint': prometheus_converged.fingerprint} | to_json }}\n"
    dest: /var/lib/glm53-tensorfold/prometheus.json
    mode: "0644"
"""

RETURN = r"""
converged:
  description: True when no part differs.
  returned: always
  type: bool
differs:
  description: One entry per part that differs (C(record), C(files), C(service)), in that order.
  returned: always
  type: list
  elements: dict
  sample: [{"part": "files", "what": "/etc/haproxy/haproxy.cfg differs"}]
summary:
  description: One line, C(converged) or C(differs:) and the parts.
  returned: always
  type: str
fingerprint:
  description: What the run wants, as one sha256; the role records it after a successful converge.
  returned: always
  type: str
"""

import os
import socket
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.glm53.tensorfold.plugins.module_utils import service_converged
from ansible_collections.glm53.tensorfold.plugins.module_utils.converged import read_health


def probe_socket(path, timeout):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        return {"ok": True, "what": ""}
    except (IOError, OSError) as exc:
        return {"ok": False, "what": "%s does not accept a connection (%s)" % (path, exc.__class__.__name__)}
    finally:
        sock.close()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            record=dict(type="path", required=True),
            files=dict(type="list", elements="dict", default=[], options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", no_log=True),
                secret=dict(type="bool", default=False),
            )),
            inputs=dict(type="raw"),
            probe_url=dict(type="str"),
            probe_socket=dict(type="path"),
            probe_timeout=dict(type="float", default=2.0),
        ),
        mutually_exclusive=[("probe_url", "probe_socket")],
        supports_check_mode=True,
    )
    params = module.params
    try:
        record = module.from_json(service_converged.read_file(params["record"]) or "null")
    except ValueError:
        record = None
    on_disk = dict((f["path"], service_converged.read_file(f["path"])) for f in params["files"])
    service = None
    if params["probe_url"]:
        health = read_health(params["probe_url"], params["probe_timeout"])
        service = {"ok": health["ok"], "what": "GET %s: %s" % (params["probe_url"], health["error"] or health["status"])}
    elif params["probe_socket"]:
        service = probe_socket(params["probe_socket"], params["probe_timeout"])
    want = service_converged.fingerprint(params["files"], params["inputs"])
    try:
        record_mode = stat.S_IMODE(os.stat(params["record"]).st_mode)
    except OSError:
        record_mode = None
    differs = service_converged.compare(want, record if isinstance(record, dict) else None, params["files"], on_disk, service,
                                        record_mode=record_mode)
    module.exit_json(changed=False, converged=not differs, differs=differs,
                     summary=service_converged.summary(differs), fingerprint=want)


if __name__ == "__main__":
    main()
