#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: image_build
short_description: Build the engine image with BuildKit and name a failed build's cause with its code
version_added: 0.2.0
description:
  - Runs M(community.docker.docker_image_build) on the host with the given options (never pulling
    the base images) and returns its result.
  - "When the build fails, the result's C(msg) is C([CODE] host: what is wrong. What to do.) -
    C(E_PATCHES) naming the patch that does not apply on O(engine_commit), or C(E_IMAGE) with what
    the failing step printed (Zig checksum, engine commit, missing binary or kernel set), or the
    build's last C(ERROR) line, or (a build that never started) the last thing the build module
    said; a host without the buildx plugin is C(E_DOCKER) saying how to install it, a build that
    ran out of disk space C(E_DISK)."
  - A build that succeeds but leaves no image under O(name):O(tag) in Docker's image store (the
    host's current buildx builder is not Docker's own, e.g. a docker-container builder) fails with C(E_DOCKER).
  - A module that crashed (no Python, a missing library) keeps Ansible's own message.
  - Only lines a RUN step printed count; the step headers that echo the Dockerfile's text do not.
  - A step that failed without a coded line is named with its exit code and at most five lines it
    printed (those that look like a cause, else its last ones).
author:
  - glm53.tensorfold contributors (@glm53)
options:
  name:
    description: The image's name, without the tag.
    type: str
    required: true
  tag:
    description: The image's tag (the tensorfold_image role's content hash).
    type: str
    required: true
  path:
    description: The build context folder on the host (Dockerfile, patches, series file).
    type: path
    required: true
  args:
    description: The build arguments.
    type: dict
    default: {}
  labels:
    description: Labels set on the image.
    type: dict
    default: {}
  network:
    description: The network the build's RUN steps use; unset uses Docker's default.
    type: str
  rebuild:
    description: C(always) builds even when the tag exists; C(never) leaves an existing tag alone.
    type: str
    choices: [always, never]
    default: never
  engine_commit:
    description: The TensorFold commit built, shortened into an C(E_PATCHES) message.
    type: str
    default: ""
attributes:
  action:
    description: An action plugin on the controller runs M(community.docker.docker_image_build) on the host.
    support: full
  check_mode:
    description: Passed on to M(community.docker.docker_image_build), which builds nothing in check mode.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
requirements:
  - The community.docker collection; Docker with the buildx plugin on the host.
"""

EXAMPLES = r"""
- name: Build the engine image with BuildKit
  glm53.tensorfold.image_build:
    name: tensorfold-native
    tag: "{{ tensorfold_image_tag }}"
    path: /var/lib/tensorfold/image/context/{{ tensorfold_image_tag }}
    args: "{{ tensorfold_image_build_args }}"
    engine_commit: "{{ tensorfold_image_engine_commit }}"
"""

RETURN = r"""
msg:
  description: "On a failed build, the coded message (C([E_PATCHES] host: patch 0101-x.patch does not apply ...))."
  returned: failure
  type: str
image:
  description: The built image's inspection, as M(community.docker.docker_image_build) returns it.
  returned: success
  type: dict
stdout:
  description: BuildKit's output; after a failed build only its last 40 lines (Ansible prints a failed task's whole result).
  returned: when the build ran
  type: str
stderr:
  description: BuildKit's error output; after a failed build only its last 40 lines.
  returned: when the build ran
  type: str
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action plugin (plugins/action/image_build.py) checks its arguments against this spec.
ARGUMENT_SPEC = dict(
    name=dict(type="str", required=True),
    tag=dict(type="str", required=True),
    path=dict(type="path", required=True),
    args=dict(type="dict", default={}),
    labels=dict(type="dict", default={}),
    network=dict(type="str"),
    rebuild=dict(type="str", choices=["always", "never"], default="never"),
    engine_commit=dict(type="str", default=""),
)


def main():
    refuse_on_host("image_build", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
