#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_madison_info
short_description: Read which versions of some packages apt can install (apt-cache madison)
version_added: 0.2.0
description:
  - Runs C(apt-cache madison) for O(packages) and returns each binary package version apt's
    cache offers as C(NAME=VERSION), in apt's order; source-package lines are left out.
  - A package apt does not know, or a host without C(apt-cache), gives no pairs rather than a
    failure, so the caller decides what a missing version means.
  - C(apt-cache madison) exits 0 for a package no source offers; when it exits otherwise (apt
    cannot read its sources, for example two entries of one repository with different
    C(Signed-By)), the module fails with apt's message, since no pairs would then say nothing.
  - Also returns which of O(packages) dpkg holds (C(dpkg-query)), so a caller marks only those
    whose hold must change.
  - Only reads; nothing on the host changes, so check mode gives the same answer.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  packages:
    description: The package names to ask about.
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - glm53.tensorfold.read_only
"""

EXAMPLES = r"""
- name: Ask apt which toolkit versions the repository offers
  glm53.tensorfold.apt_madison_info:
    packages: [nvidia-container-toolkit, nvidia-container-toolkit-base]
  register: offered

- name: Install only a version apt has
  ansible.builtin.apt:
    name: nvidia-container-toolkit=1.17.8-1
  when: "'nvidia-container-toolkit=1.17.8-1' in offered.pairs"
"""

RETURN = r"""
pairs:
  description: Each binary package version apt can install, as C(NAME=VERSION), in apt's order, without repeats.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-container-toolkit=1.17.8-1", "nvidia-container-toolkit=1.17.7-1"]
held:
  description: The packages of O(packages) whose dpkg selection is C(hold), in that order (empty without C(dpkg-query)).
  returned: always
  type: list
  elements: str
  sample: ["nvidia-container-toolkit"]
rc:
  description: The exit status of C(apt-cache madison) (null when C(apt-cache) is not installed).
  returned: always
  type: int
  sample: 0
stderr:
  description: What C(apt-cache madison) printed on its error output.
  returned: when it ran
  type: str
  sample: ""
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.apt_madison import held_packages, madison_error, madison_pairs


def main():
    module = AnsibleModule(
        argument_spec=dict(packages=dict(type="list", elements="str", required=True)),
        supports_check_mode=True,
    )
    packages = module.params["packages"]
    held = []
    dpkg_query = module.get_bin_path("dpkg-query", required=False)
    if dpkg_query:
        # Exits 1 when a package is unknown, after listing the others.
        dummy, out, dummy = module.run_command([dpkg_query, "-W", "-f", "${Package}\t${db:Status-Want}\n"] + packages)
        held = held_packages(out, packages)
    apt_cache = module.get_bin_path("apt-cache", required=False)
    if not apt_cache:
        module.exit_json(changed=False, pairs=[], rc=None, held=held)
    rc, out, err = module.run_command([apt_cache, "madison"] + packages)
    error = madison_error(rc, err)
    if error:
        module.fail_json(msg=error, rc=rc, stderr=err, pairs=[], held=held)
    module.exit_json(changed=False, pairs=madison_pairs(out), rc=rc, stderr=err, held=held)


if __name__ == "__main__":
    main()
