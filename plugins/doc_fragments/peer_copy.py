# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options of the modules that copy a file another host serves with hf_peer_serve
    # (peer_fetch, peer_image_load): where it is served, what it must be, how long to try.
    DOCUMENTATION = r"""
options:
  url:
    description: The served file's URL, C(http://ADDRESS:PORT/files/NAME).
    type: str
    required: true
  size:
    description: The file's size in bytes.
    type: int
    required: true
  sha256:
    description: The file's sha256, 64 hex digits.
    type: str
    required: true
  secret:
    description: The run's secret the server asks for (at least 16 characters). Never logged.
    type: str
    required: true
  timeout:
    description: Seconds one connection may wait for the server's bytes.
    type: int
    default: 60
  wait:
    description: Seconds to wait for the server to accept the first connection.
    type: int
    default: 60
  attempts:
    description: Fetches in all before a wrong or broken transfer fails the task.
    type: int
    default: 3
  host_label:
    description: The host name used in problem messages.
    type: str
"""
