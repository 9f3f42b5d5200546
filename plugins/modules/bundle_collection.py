#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_collection
short_description: Pack the collection into the air-gapped bundle, and nothing else of its folder
description:
  - "Writes C(ROOT/collection/glm53-tensorfold-VERSION.tar.gz), keyed on a sha256 over the files
    it packs (kept in C(ROOT/.state/collection.json)): it is packed again whenever one of them
    changed (a site patch under C(files/patches), a fix without a version bump), else left as it is."
  - "From a checkout (I(src) holds C(galaxy.yml)) only what the collection consists of is packed:
    C(galaxy.yml), C(README.md), C(LICENSE), C(CHANGELOG.rst), C(meta), C(plugins), C(roles),
    C(playbooks), C(docs), C(changelogs), C(files), C(templates), C(tests/unit), C(tests/sanity)
    and the example inventories C(inventories/example), C(inventories/example-airgapped) and
    C(inventories/demo), less hidden files and caches; they are copied into a staging folder and
    built there with C(ansible-galaxy collection build). A site inventory kept in the checkout,
    its vault, C(.gitignore) and the like never reach the bundle."
  - From an installed copy (C(FILES.json), no C(galaxy.yml)) exactly the files its C(FILES.json)
    lists.
  - Fails with C(E_BUNDLE) before packing when a packed file holds a secret (a vault file, a
    private key, or in an inventory a literal C(tensorfold_hf_token), C(tensorfold_api_key),
    C(vault_*) or Ansible password (C(ansible_password), C(ansible_ssh_pass),
    C(ansible_become_password)) value, on the key's line or the next), naming the file and line,
    never the value.
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
extends_documentation_fragment:
  - glm53.tensorfold.bundle
options:
  src:
    description: The collection's folder (a checkout or an installed copy).
    type: path
    required: true
  version:
    description: The collection's version, in the tarball's name.
    type: str
    required: true
attributes:
  check_mode:
    support: full
    description: Reports whether the tarball would be packed; writes nothing.
"""

EXAMPLES = r"""
- name: Pack the collection
  glm53.tensorfold.bundle_collection:
    root: /srv/glm53-bundle
    src: /home/ops/glm53-tensorfold
    version: 0.1.0
"""

RETURN = r"""
tarball:
  description: The tarball's name in the item folder C(collection).
  returned: success
  type: str
members_sha256:
  description: The sha256 over the packed files (each one's sha256, size and path), recorded in the manifest.
  returned: success
  type: str
packed_files:
  description: How many files were packed (0 when the tarball was there already, from the same files).
  returned: success
  type: int
left_out:
  description: What the folder holds besides the collection (top-level names, or files of an installed copy), not packed.
  returned: when packed
  type: list
  elements: str
"""

import glob
import os
import shutil
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem


def main():
    module = AnsibleModule(
        argument_spec=bundle.module_args(
            src=dict(type="path", required=True),
            version=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    host = params["host_label"] or "localhost"
    root, src = params["root"], params["src"]
    tarball = "glm53-tensorfold-%s.tar.gz" % params["version"]
    target = os.path.join(root, "collection", tarball)
    packed_from = os.path.join(root, bundle.STATE, "collection.json")
    work = os.path.join(root, bundle.STATE, "collection-src")
    out = os.path.join(root, bundle.STATE, "collection-build")
    try:
        members, left_out = bundle.collection_members(src)
        secrets = bundle.secret_problems(src, members)
        if secrets:
            module.fail_json(msg=problem("E_BUNDLE", host, "collection: %s would carry a secret into the bundle: %s" % (src, ", ".join(secrets)),
                                         "Keep site inventories and vault files outside the collection's folder"
                                         " (or refer to vault variables there), and run again."), code="E_BUNDLE")
        key = {"tarball": tarball, "members_sha256": bundle.members_sha256(src, members)}
        if os.path.isfile(target) and bundle.load_json(packed_from, {}) == key:
            module.exit_json(changed=False, tarball=tarball, packed_files=0, members_sha256=key["members_sha256"])
        if module.check_mode:
            module.exit_json(changed=True, tarball=tarball, packed_files=len(members), left_out=left_out,
                             members_sha256=key["members_sha256"])
        bundle.stage_collection(src, members, work)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out, 0o755)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target), 0o755)
        built = os.path.join(out, tarball)
        if "galaxy.yml" in members:
            galaxy = module.get_bin_path("ansible-galaxy", required=True, opt_dirs=[os.path.dirname(sys.executable)])
            rc, stdout, stderr = module.run_command([galaxy, "collection", "build", "--output-path", out, work])
            made = glob.glob(os.path.join(out, "*.tar.gz"))
            if rc != 0 or len(made) != 1:
                raise bundle.BundleError("collection: ansible-galaxy collection build failed (rc %d): %s" % (rc, (stderr or stdout).strip()[-400:]),
                                         ["collection"])
            built = made[0]
        else:
            bundle.pack_installed(work, members, built)
        os.chmod(built, 0o644)
        os.rename(built, target)
        bundle.write_json_if_changed(packed_from, key)
    except (bundle.BundleError, OSError) as err:
        module.fail_json(msg=problem("E_BUNDLE", host, getattr(err, "what", str(err))), code="E_BUNDLE")
    finally:
        if not module.check_mode:
            for folder in (work, out):
                shutil.rmtree(folder, ignore_errors=True)
    module.exit_json(changed=True, tarball=tarball, packed_files=len(members), left_out=left_out,
                     members_sha256=key["members_sha256"])


if __name__ == "__main__":
    main()
