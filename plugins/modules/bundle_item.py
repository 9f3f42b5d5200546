#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_item
short_description: Put one item into the air-gapped bundle and record its files' sha256
description:
  - Copies I(src) (a file or a folder) into the item's folder C(ROOT/NAME), resumably (a killed
    copy continues from its last fsynced 16 MiB), then lists every file of the item with its size
    and sha256 in C(ROOT/.state/items/), from which M(glm53.tensorfold.bundle_manifest) writes the
    manifest.
  - Files already holding the same bytes are not copied, and files not written since their last
    hashing are not read again, so building an unchanged item again copies and reads nothing and
    reports no change.
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
extends_documentation_fragment:
  - glm53.tensorfold.bundle
options:
  name:
    description: The item, a relative folder of the bundle such as C(weights/model) or C(image).
    type: str
    required: true
  kind:
    description: What the item is (C(weights), C(image), C(toolkit), C(python), C(collection), C(inputs)).
    type: str
    required: true
  src:
    description: A file or folder copied into the item's folder first. Without it the folder is recorded as it is.
    type: path
  meta:
    description: What the item holds (repository and revision, image id and tag, version...), kept in the manifest.
    type: dict
    default: {}
  prune:
    description:
      - Make the item hold exactly what I(src) brings and what I(keep) names; any other file an
        earlier build left there (a patch renamed in its series, an older tarball or listing) is
        removed before the item is recorded.
    type: bool
    default: false
  keep:
    description: With I(prune), the files or folders of the item (relative to it) that stay though I(src) does not bring them.
    type: list
    elements: str
    default: []
  state:
    description:
      - C(present) copies I(src), prunes and records the item.
      - C(checked) compares the item's files with its last record and removes each one whose bytes
        differ (written since it was recorded, such as a truncated archive), so that the part which
        makes the item makes it again; it records nothing. Run before the part, which otherwise
        finds the file there and keeps it.
    type: str
    choices: [present, checked]
    default: present
attributes:
  check_mode:
    support: full
    description: Reports whether the item would change (or, with C(state=checked), which files are damaged); writes nothing.
"""

EXAMPLES = r"""
- name: Put the saved image into the bundle
  glm53.tensorfold.bundle_item:
    root: /srv/glm53-bundle
    name: image
    kind: image
    src: /tmp/image.tar
    meta: {ref: "glm53/tensorfold-native:0123456789ab", id: "sha256:..."}
"""

RETURN = r"""
item:
  description: The item's record (C(name), C(kind), C(meta), C(files) with path, size and sha256, C(size), C(sha256)).
  returned: success
  type: dict
copied_files:
  description: Files copied by this run.
  returned: always
  type: int
copied_bytes:
  description: Bytes copied by this run (0 when nothing changed).
  returned: always
  type: int
hashed_bytes:
  description: Bytes read to compute checksums (0 when no file was written since it was hashed).
  returned: always
  type: int
removed:
  description: Files removed from the item (by I(prune), or damaged ones with C(state=checked)).
  returned: always
  type: list
  elements: str
damaged:
  description: With C(state=checked), each file whose bytes differ from the item's last record, and how.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem


def check(module, root, name, host):
    """state=checked: remove the files written since the item was recorded."""
    hasher = bundle.Hasher(root)
    damaged, removed = [], []
    try:
        record = bundle.load_json(bundle.item_record_path(root, name), None)
        found = bundle.damaged_files(root, name, record, hasher)
        damaged, removed = [f["what"] for f in found], [f["path"] for f in found]
        if not module.check_mode:
            for rel in removed:
                os.unlink(os.path.join(root, name, rel))
            hasher.save()
    except (bundle.BundleError, OSError) as err:
        module.fail_json(msg=problem("E_BUNDLE", host, getattr(err, "what", str(err))), code="E_BUNDLE")
    module.exit_json(changed=bool(damaged), damaged=damaged, removed=removed, copied_files=0, copied_bytes=0,
                     hashed_bytes=hasher.bytes_read)


def main():
    module = AnsibleModule(
        argument_spec=bundle.module_args(
            name=dict(type="str", required=True),
            kind=dict(type="str", required=True),
            src=dict(type="path"),
            meta=dict(type="dict", default={}),
            prune=dict(type="bool", default=False),
            keep=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["present", "checked"], default="present"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host_label"] or "localhost"
    root, name = params["root"], params["name"]
    copied_files = copied_bytes = 0
    removed = []
    try:
        bundle.check_item_name(name)
        if params["state"] == "checked":
            check(module, root, name, host)
        folder = os.path.join(root, name)
        src = params["src"]
        if src and not os.path.exists(src):
            raise bundle.BundleError("%s: the source %s does not exist" % (name, src), [name])
        wanted = bundle.source_files(src) if src else []
        if params["prune"] and not wanted and not params["keep"]:
            raise bundle.BundleError("%s: pruning with neither a source nor files to keep would empty the item" % name, [name])
        if module.check_mode:
            same = all(bundle.same_file(s, t) for s, t in bundle.copy_pairs(src, folder)) if src else True
            removed = bundle.prune_item(root, name, wanted, params["keep"], dry_run=True) if params["prune"] else []
            if not same or removed:
                module.exit_json(changed=True, removed=removed, damaged=[], copied_files=0, copied_bytes=0, hashed_bytes=0)
        elif src:
            copied_files, copied_bytes = bundle.copy_tree(src, folder)
        if params["prune"] and not module.check_mode:
            removed = bundle.prune_item(root, name, wanted, params["keep"])
        hasher = bundle.Hasher(root)
        record = bundle.describe_item(root, name, params["kind"], params["meta"], hasher)
    except (bundle.BundleError, OSError) as err:
        module.fail_json(msg=problem("E_BUNDLE", host, getattr(err, "what", str(err))), code="E_BUNDLE")
    path = bundle.item_record_path(root, name)
    changed = copied_files > 0 or bool(removed) or bundle.load_json(path, None) != record
    if not module.check_mode:
        bundle.write_json_if_changed(path, record)
        hasher.save(keep_prefixes=[name])
    module.exit_json(changed=changed, item=record, copied_files=copied_files, copied_bytes=copied_bytes,
                     hashed_bytes=hasher.bytes_read, removed=removed, damaged=[])


if __name__ == "__main__":
    main()
