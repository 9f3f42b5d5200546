# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    """The bundle folder option shared by the bundle_* modules."""

    DOCUMENTATION = r"""
options:
  root:
    description:
      - The bundle's folder (docs/bundle.md). Its C(.state/) holds the item records and the sha256 cache.
    type: path
    required: true
  host_label:
    description: The host name used in problem messages.
    type: str
"""
