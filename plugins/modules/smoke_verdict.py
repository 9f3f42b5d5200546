#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: smoke_verdict
short_description: Judge the smoke test's answers
version_added: 0.2.0
description:
  - Reads the registered M(ansible.builtin.uri) results of the smoke requests and returns the
    verdict with coded problems - C(E_API) when C(/health) does not answer, C(E_SMOKE) for a wrong
    answer, C(E_WEDGED) when a completion got no answer while C(/health) said ok - each quoting
    the status or the start of the reply that explains it.
  - It does not fail; the smoke_test role publishes the verdict as C(smoke_test_result) and fails
    the host.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  answers:
    description: Request name (C(health), C(models), C(chat), C(vision), C(without_key), C(with_key)) to its uri result.
    type: dict
    required: true
  url:
    description: The base URL the requests went to.
    type: str
    required: true
  endpoint:
    description: The endpoint published in the result (default O(url)).
    type: str
  served_name:
    description: The model id C(/v1/models) must list.
    type: str
    required: true
  vision:
    description: Whether the image request counts.
    type: bool
    default: false
  api_key_set:
    description: Whether the key requests count (401 without the key, 200 with it).
    type: bool
    default: false
extends_documentation_fragment:
  - glm53.tensorfold.controller
"""

EXAMPLES = r"""
- name: Judge the answers
  glm53.tensorfold.smoke_verdict:
    answers: {health: "{{ health }}", models: "{{ models }}", chat: "{{ chat }}"}
    url: http://127.0.0.1:8020
    served_name: GLM-5.3-Flash
"""

RETURN = r"""
verdict:
  description: The verdict.
  returned: always
  type: dict
  contains:
    status:
      description: C(live) or C(failed).
      type: str
    endpoint:
      description: O(endpoint).
      type: str
    reply:
      description: The chat reply's text.
      type: str
    problems:
      description: Every problem as a record (C(code), C(severity), C(host), C(message), C(check)).
      type: list
      elements: dict
    checks:
      description: Each request with C(name), C(ok) and the C(status) it answered.
      type: list
      elements: dict
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/smoke_verdict.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    answers=dict(type="dict", required=True),
    url=dict(type="str", required=True),
    endpoint=dict(type="str"),
    served_name=dict(type="str", required=True),
    vision=dict(type="bool", default=False),
    api_key_set=dict(type="bool", default=False),
)


def main():
    refuse_on_host("smoke_verdict", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
