#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_manifest
short_description: Write the air-gapped bundle's manifest from its items
description:
  - Writes C(ROOT/MANIFEST.json), which lists every item with its kind, size, sha256 (over its
    file list) and every file's size and sha256, from the records that
    M(glm53.tensorfold.bundle_item) left for each item.
  - Leaves the file alone (no change) when it already says exactly that.
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
extends_documentation_fragment:
  - glm53.tensorfold.bundle
options:
  items:
    description: The items the bundle holds; each must have been recorded.
    type: list
    elements: str
    required: true
  allow_missing:
    description:
      - Write the manifest of the items recorded so far and return the others in C(missing) (a build in parts).
      - The manifest names them too (its C(missing) list), so M(glm53.tensorfold.bundle_verify) refuses the
        bundle until they are built.
    type: bool
    default: false
  meta:
    description: What the bundle as a whole is for (collection version, settings it was built with).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reports whether the manifest would change; writes nothing.
"""

EXAMPLES = r"""
- name: Write the manifest
  glm53.tensorfold.bundle_manifest:
    root: /srv/glm53-bundle
    items: [image, weights/model, toolkit]
"""

RETURN = r"""
contents:
  description: Per item, its size and sha256.
  returned: success
  type: dict
missing:
  description: Items asked for that have no record yet.
  returned: always
  type: list
  elements: str
size:
  description: The bundle's size in bytes.
  returned: success
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem


def main():
    module = AnsibleModule(
        argument_spec=bundle.module_args(
            items=dict(type="list", elements="str", required=True),
            meta=dict(type="dict", default={}),
            allow_missing=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    root = module.params["root"]
    host = module.params["host_label"] or "localhost"
    records, missing = [], []
    for name in module.params["items"]:
        record = bundle.load_json(bundle.item_record_path(root, name), None)
        if record is None:
            missing.append(name)
        else:
            records.append(record)
    if missing and not module.params["allow_missing"]:
        module.fail_json(msg=problem("E_BUNDLE", host, "the bundle %s lacks %s (not built yet)" % (root, ", ".join(missing)),
                                     "Run playbooks/bundle.yml again: it resumes where it stopped."),
                         code="E_BUNDLE", missing=missing)
    manifest = bundle.assemble_manifest(records, module.params["meta"], missing)
    path = os.path.join(root, bundle.MANIFEST)
    changed = bundle.load_json(path, None) != manifest
    if changed and not module.check_mode:
        bundle.write_json_if_changed(path, manifest)
    summary = dict((name, {"size": item["size"], "sha256": item["sha256"]}) for name, item in manifest["items"].items())
    module.exit_json(changed=changed, contents=summary, size=manifest["size"], missing=missing)


if __name__ == "__main__":
    main()
