#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_plan
short_description: Work out the dry-run plan of one host, as lines
version_added: 0.2.0
description:
  - Like the recipe's C(DRY_RUN=1 ./start.sh) - the image reference and whether it would be
    built, the build command, what would be downloaded and about how much, both rank command
    lines, the C(docker run) and the smoke requests. What is not known (no image reference yet,
    Docker not answering) is printed as not known.
  - The API key never appears; O(settings) carries C(tensorfold_api_key_set) instead of the key.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  settings:
    description: The recipe's settings, C(tensorfold_*) names to values.
    type: dict
    required: true
  known:
    description: >-
      What is known about the host - C(image_ref), C(image_present), C(image_note), C(model_path),
      C(drafter_path), C(model_present), C(drafter_present), C(gpus), C(cached_context),
      C(smoke_url), C(max_tokens).
    type: dict
    default: {}
extends_documentation_fragment:
  - glm53.tensorfold.controller
"""

EXAMPLES = r"""
- name: Work out the plan
  glm53.tensorfold.host_plan:
    settings: {tensorfold_port: 8020, tensorfold_api_key_set: false}
    known: {image_ref: "{{ tensorfold_image_ref }}"}
  register: plan
"""

RETURN = r"""
lines:
  description: The plan's lines.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/host_plan.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    settings=dict(type="dict", required=True),
    known=dict(type="dict", default={}),
)


def main():
    refuse_on_host("host_plan", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
