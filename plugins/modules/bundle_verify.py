#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_verify
short_description: Check the air-gapped bundle against its manifest, naming each wrong item
description:
  - Reads C(ROOT/MANIFEST.json) and checks every file of the items asked for (all by default),
    that it is present, its size and its sha256; files the manifest does not list are wrong too. Also checks
    that the items a site needs are there and hold the revisions and versions the inventory pins.
  - With I(rehash=true) every byte is read again. With I(rehash=false) a file whose sha256 was
    computed before and that was not written since (same size, mtime, ctime, inode) is not read
    again, so the bundle is verified once where it lies.
  - Changes nothing but its own sha256 cache in C(ROOT/.state/), made when missing (a bundle
    unpacked from its tarball, which leaves C(.state) out); when the bundle cannot be written
    (read-only media) the cache is kept in I(hash_cache_dir) instead.
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
extends_documentation_fragment:
  - glm53.tensorfold.bundle
options:
  items:
    description:
      - The items to check; when empty, all the manifest lists, built or named as not built yet.
        An item not built is a problem.
    type: list
    elements: str
    default: []
  pins:
    description: Per item, the C(meta) values the inventory expects, such as C(revision) of C(weights/model).
    type: dict
    default: {}
  collection_version:
    description:
      - The version of the collection reading the bundle. A bundle whose manifest records another
        version (or none) fails with C(E_BUNDLE_VERSION) (with I(fail_on_problem=false) it is
        returned in C(version_problem)).
    type: str
  rehash:
    description: Read every file again instead of trusting the cache of files not written since.
    type: bool
    default: true
  fail_on_problem:
    description: Fail with C(E_BUNDLE) when a problem is found; with false, return the problems only.
    type: bool
    default: true
  hash_cache_dir:
    description: Where the sha256 cache of a bundle that cannot be written (read-only media) is kept, on the controller.
    type: path
    default: ~/.cache/glm53-tensorfold/bundle-hashes
attributes:
  check_mode:
    support: full
    description: Reads only (the sha256 cache is not written).
"""

EXAMPLES = r"""
- name: Re-hash the whole bundle
  glm53.tensorfold.bundle_verify:
    root: /srv/glm53-bundle
"""

RETURN = r"""
problems:
  description: One entry per wrong item, C(item) and C(what) (each wrong file named).
  returned: always
  type: list
  elements: dict
manifest:
  description: Per item of the manifest, its kind, size, sha256 and meta (no file lists).
  returned: when the manifest could be read
  type: dict
version_problem:
  description: The bundle was built by another version of the collection than I(collection_version) (what is wrong), else null.
  returned: always
  type: str
checked_items:
  description: The items checked.
  returned: always
  type: list
  elements: str
hashed_bytes:
  description: Bytes read to compute checksums.
  returned: always
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem


def main():
    module = AnsibleModule(
        argument_spec=bundle.module_args(
            items=dict(type="list", elements="str", default=[]),
            pins=dict(type="dict", default={}),
            collection_version=dict(type="str"),
            rehash=dict(type="bool", default=True),
            fail_on_problem=dict(type="bool", default=True),
            hash_cache_dir=dict(type="path", default="~/.cache/glm53-tensorfold/bundle-hashes"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    root = params["root"]
    host = params["host_label"] or "localhost"
    manifest = bundle.load_json(os.path.join(root, bundle.MANIFEST), None)
    cache_path = bundle.hash_cache_path(root, params["hash_cache_dir"])
    hasher = bundle.Hasher(root, use_cache=not params["rehash"], path=cache_path)
    version_problem = None
    if manifest is None or manifest.get("format") != bundle.FORMAT:
        problems = [{"item": bundle.MANIFEST, "what": "%s has no readable %s (format %d)" % (root, bundle.MANIFEST, bundle.FORMAT)}]
        summary, names = None, []
    else:
        version_problem = bundle.version_problem(manifest, params["collection_version"])
        names = params["items"] or sorted(set(manifest.get("items", {})) | set(manifest.get("missing", [])))
        problems = bundle.verify_bundle(root, manifest, hasher, names)
        problems += bundle.pin_problems(manifest, params["pins"])
        summary = dict((name, dict((k, item[k]) for k in ("kind", "size", "sha256", "meta")))
                       for name, item in manifest.get("items", {}).items())
    if not module.check_mode and os.path.isdir(root):
        try:
            hasher.save()
        except OSError:
            pass  # a cache that cannot be written: the bundle is checked all the same, only not remembered
    result = dict(changed=False, problems=problems, checked_items=names, hashed_bytes=hasher.bytes_read,
                  version_problem=version_problem)
    if summary is not None:
        result["manifest"] = summary
    if version_problem and params["fail_on_problem"]:
        module.fail_json(msg=problem("E_BUNDLE_VERSION", host, "%s: %s" % (root, version_problem)), code="E_BUNDLE_VERSION", **result)
    if problems and params["fail_on_problem"]:
        module.fail_json(msg=problem("E_BUNDLE", host, "the bundle %s is not usable: %s" % (
            root, " | ".join(p["what"] for p in problems))), code="E_BUNDLE", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
