# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: patch_series
author: glm53.tensorfold contributors (@glm53)
version_added: 0.1.0
short_description: Read the engine patch series from folders on the controller, in application order
description:
  - Reads every patch file of each folder given, on the controller, and returns one entry per patch
    in application order - the first folder's patches (the recipe's series) by number, then the
    second folder's (the site patches) by number, and so on.
  - Every regular file counts as a patch except hidden files, C(README*) and C(series), so a
    misnamed patch is reported by M(glm53.tensorfold.image_inputs) instead of
    being skipped silently.
  - An empty term is skipped, so an unset source costs nothing.
options:
  _terms:
    description: Folders, in the order their patches are applied.
    type: list
    elements: path
    required: true
  sources:
    description: A name per folder for the entries' C(source) (default C(recipe), then C(site)).
    type: list
    elements: str
    default: [recipe, site]
"""

EXAMPLES = r"""
- name: Read the recipe's series and the site patches
  ansible.builtin.set_fact:
    series: "{{ query('glm53.tensorfold.patch_series', '/cache/recipe/patches', 'files/patches') }}"
"""

RETURN = r"""
_raw:
  description: One entry per patch, in application order.
  type: list
  elements: dict
  contains:
    name:
      description: The file name, such as C(0001-glm-exl3-prompt-experts.patch).
    sha256:
      description: The sha256 of the file's bytes.
    source:
      description: Which folder it came from (C(recipe), C(site)).
    path:
      description: The file's path on the controller.
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import file_entry, order_source, patch_names


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        sources = kwargs.get("sources") or ["recipe", "site"]
        entries = []
        for index, folder in enumerate(terms):
            if not folder:
                continue
            source = sources[index] if index < len(sources) else "source%d" % index
            if not os.path.isdir(folder):
                raise AnsibleLookupError(problem("E_SETTINGS", (variables or {}).get("inventory_hostname", "controller"),
                                                 "patch folder %s (%s) does not exist on the controller" % (folder, source),
                                                 "Point the setting that names it at an existing folder."))
            for name in order_source(patch_names(folder)):
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    entries.append(file_entry(name, handle.read(), source, path))
        return entries
