#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: image_inputs
short_description: Check the engine image's patch series and compute its content-hash tag
version_added: 0.2.0
description:
  - Judges the patch series (from the P(glm53.tensorfold.patch_series#lookup) lookup) the way the
    build would meet it - names C(NNNN-name.patch), no number twice, the recipe's series of
    O(expected_count) patches, ascending numbers across the recipe's and the site's patches - and
    returns every problem as an C(E_PATCHES) record.
  - Hashes the series (each patch's name and sha256, in order) into the build argument
    C(PATCH_SERIES_SHA256), and computes the image's tag, a short sha256 (16 hex digits) over
    exactly the rendered Dockerfile, every patch's bytes in order and the build arguments. Nothing
    else goes in, so editing docs, inventories or other roles never changes the tag, and editing
    a patch always does.
  - Does not fail on problems; the tensorfold_image role reports them all at once.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  series:
    description: The patch series in application order, as the P(glm53.tensorfold.patch_series#lookup) lookup returns it.
    type: list
    elements: dict
    required: true
  expected_count:
    description: How many patches the recipe's series must have; unset checks no count.
    type: int
  dockerfile:
    description: The rendered Dockerfile's text.
    type: str
    required: true
  pins:
    description: The build arguments without C(PATCH_SERIES_SHA256) (engine commit, Zig version and sha256, base images...).
    type: dict
    required: true
extends_documentation_fragment:
  - glm53.tensorfold.controller
"""

EXAMPLES = r"""
- name: Check the series and compute the tag
  glm53.tensorfold.image_inputs:
    series: "{{ query('glm53.tensorfold.patch_series', recipe_patches, site_patches) }}"
    expected_count: 93
    dockerfile: "{{ lookup('ansible.builtin.template', 'Dockerfile.j2') }}"
    pins: {TENSORFOLD_COMMIT: "{{ engine_commit }}", ZIG_VERSION: 0.15.2}
  register: image
"""

RETURN = r"""
problems:
  description: Every patch series problem, as C(E_PATCHES) records (C(code), C(severity), C(host), C(message)).
  returned: always
  type: list
  elements: dict
series_hash:
  description: sha256 over each patch's name and sha256, in order.
  returned: always
  type: str
build_args:
  description: O(pins) plus C(PATCH_SERIES_SHA256), the build arguments the image is built with.
  returned: always
  type: dict
tag:
  description: The image's content-hash tag, 16 hex digits.
  returned: always
  type: str
  sample: 3f6c2a9d0b1e4f57
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/image_inputs.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    series=dict(type="list", elements="dict", required=True),
    expected_count=dict(type="int"),
    dockerfile=dict(type="str", required=True),
    pins=dict(type="dict", required=True),
)


def main():
    refuse_on_host("image_inputs", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
