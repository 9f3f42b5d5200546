#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: engine_smoke
short_description: Smoke-test the engine's OpenAI-compatible API and judge the answers
description:
  - Sends, from the host, the recipe's smoke requests to the engine's API - C(GET /health) (asked up to
    O(health_tries) times until it answers 200 with C({"status":"ok"}) and is not C("warming":true); still warming
    after the last try, the requests go all the same), C(GET /v1/models), one chat completion (temperature 0,
    thinking off, at most O(max_tokens) tokens), with O(vision) one carrying a small generated PNG as a
    C(data:image/png;base64,) URL, and with O(api_key) set C(GET /v1/models) without the key (401
    expected) and with it (200 expected) - and returns the verdict.
  - Every request is sent and judged, so one run shows every wrong answer. Problems are coded -
    C(E_API) when C(/health) does not answer C({"status":"ok"}) (nothing else is asked then), C(E_SMOKE)
    for a wrong answer, C(E_WEDGED) when the chat request got no answer before O(timeout) while
    C(/health) said ok - each quoting the status or the start of the reply that explains it.
  - Saves C(models.json) (the C(/v1/models) reply) and C(smoke.json) (the verdict, the URL, the model)
    into O(save_dir) when that folder exists; neither holds a request header or a time stamp, so the
    same answers rewrite nothing (C(changed=false)).
  - It does not fail on a wrong answer; the smoke_test role publishes the verdict as
    C(smoke_test_result) and fails the host.
  - In check mode it sends nothing and returns the requests it would send.
  - The requests go straight from the host to O(url) - no proxy from the environment, no redirect
    followed, an C(https) URL's certificate checked.
  - Where the connection pipelines, outside check mode, its action runs the same code in the host's own
    Python with no AnsiballZ (the box reader); C(read_with) says which ran.
version_added: 0.2.0
author:
  - glm53.tensorfold contributors (@glm53)
options:
  url:
    description: The base URL the requests go to, as the host reaches the API (without C(/v1)).
    type: str
    required: true
  endpoint:
    description: The URL clients use, published in the verdict (default O(url)).
    type: str
  host:
    description: The inventory name used in messages.
    type: str
    required: true
  served_name:
    description: The model id C(/v1/models) must list and the chat requests name.
    type: str
    required: true
  api_key:
    description:
      - The API key; empty when the engine has none. Sent only in the C(Authorization) header, never
        returned, saved or printed.
    type: str
    default: ""
  vision:
    description: Whether to send the request with an image.
    type: bool
    default: false
  prompt:
    description: The chat request's prompt.
    type: str
    default: Say hello in one short sentence.
  image_prompt:
    description: The image request's question.
    type: str
    default: Which two colours does this picture show? One short sentence.
  image_size:
    description: Width and height in pixels of the generated PNG (1 to 256).
    type: int
    default: 8
  max_tokens:
    description: Reply limit of the chat requests.
    type: int
    default: 32
  timeout:
    description: Seconds one request may take.
    type: int
    default: 120
  health_tries:
    description: How many times C(/health) is asked before it counts as down.
    type: int
    default: 5
  health_delay:
    description: Seconds between two C(/health) tries.
    type: int
    default: 3
  save_dir:
    description: Folder for C(models.json) and C(smoke.json); nothing is saved when it does not exist or is empty.
    type: path
    default: ""
attributes:
  check_mode:
    description: Sends nothing; returns the requests it would send and a C(planned) verdict.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
"""

EXAMPLES = r"""
- name: Smoke-test the API
  glm53.tensorfold.engine_smoke:
    url: http://127.0.0.1:8020
    endpoint: http://10.20.0.11:8020/v1
    host: "{{ inventory_hostname }}"
    served_name: GLM-5.3-Flash
    api_key: "{{ tensorfold_api_key }}"
    vision: true
    save_dir: /srv/glm53/logs/current
  register: smoke
"""

RETURN = r"""
verdict:
  description: The verdict.
  returned: always
  type: dict
  contains:
    status:
      description: C(live), C(failed), or C(planned) in check mode.
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
requests:
  description: The requests, one line each (the key never shown).
  returned: always
  type: list
  elements: str
saved:
  description: The files written or found up to date in O(save_dir); empty when nothing was saved.
  returned: always
  type: list
  elements: str
read_with:
  description: Which ran the smoke test, C(box reader) (the host's Python ran the module's code, no AnsiballZ) or C(module).
  returned: when run by its action
  type: str
  sample: box reader
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import run_module


ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    endpoint=dict(type="str"),
    host=dict(type="str", required=True),
    served_name=dict(type="str", required=True),
    api_key=dict(type="str", default="", no_log=True),
    vision=dict(type="bool", default=False),
    prompt=dict(type="str", default="Say hello in one short sentence."),
    image_prompt=dict(type="str", default="Which two colours does this picture show? One short sentence."),
    image_size=dict(type="int", default=8),
    max_tokens=dict(type="int", default=32, no_log=False),
    timeout=dict(type="int", default=120),
    health_tries=dict(type="int", default=5),
    health_delay=dict(type="int", default=3),
    save_dir=dict(type="path", default=""),
)


def main():
    # Its action (plugins/action/engine_smoke.py) runs the same run_module on the host without this
    # module where the connection pipelines, outside check mode.
    run_module(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
