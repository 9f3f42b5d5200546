#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_sources_info
short_description: Find the apt source files that already name a repository
version_added: 0.3.0
description:
  - Reads C(/etc/apt/sources.list) and the C(.list) and C(.sources) files of
    C(/etc/apt/sources.list.d) (the names apt reads) and returns each file with an enabled
    C(deb) or C(deb-src) entry for the repository O(uri).
  - The repository is compared the way apt compares it when it refuses two entries with different
    C(Signed-By) keys (C(Conflicting values set for option Signed-By)) without the scheme, with
    C($(ARCH)) read as O(arch) and with or without a closing slash.
  - Also says which of the paths in O(present) exist (files the caller removes or keeps), so one
    look answers both.
  - Only reads; nothing on the host changes, so check mode gives the same answer.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  uri:
    description: The repository, as the caller's own source names it (for a flat repository, with its architecture).
    type: str
    required: true
  arch:
    description: The host's architecture in Debian's naming (C(amd64), C(arm64)), for entries that write C($(ARCH)).
    type: str
  exclude:
    description: Files not to look at (the caller's own source, files it removes anyway).
    type: list
    elements: path
    default: []
  sources_list:
    description: apt's main source file.
    type: path
    default: /etc/apt/sources.list
  sources_dir:
    description: apt's folder of source files.
    type: path
    default: /etc/apt/sources.list.d
  present:
    description: Paths to look for; RV(present) lists those that exist (a dangling link counts).
    type: list
    elements: path
    default: []
extends_documentation_fragment:
  - glm53.tensorfold.read_only
"""

EXAMPLES = r"""
- name: Look for another source of NVIDIA's repository
  glm53.tensorfold.apt_sources_info:
    uri: https://nvidia.github.io/libnvidia-container/stable/deb/amd64
    arch: amd64
    exclude: [/etc/apt/sources.list.d/nvidia-container-toolkit.sources]
  register: others

- name: Refuse to add a second one
  ansible.builtin.fail:
    msg: "{{ others.found | map(attribute='shown') | join(', ') }} already name the repository"
  when: others.found | length > 0
"""

RETURN = r"""
found:
  description:
    - Each file with an entry for O(uri), in the order apt reads them, with the entries' line numbers
      (a deb822 stanza's first line) and C(shown), the file and lines as a message names them.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/etc/apt/sources.list.d/nvidia.list", "lines": [1], "shown": "/etc/apt/sources.list.d/nvidia.list (line 1)"}]
present:
  description: The paths of O(present) that exist, in the order given.
  returned: always
  type: list
  elements: str
  sample: [/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.apt_sources import SOURCE_FILE_NAME, entries_naming, shown


def _read(module, path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError) as err:
        module.fail_json(msg="cannot read the apt source %s: %s" % (path, err))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            uri=dict(type="str", required=True),
            arch=dict(type="str"),
            exclude=dict(type="list", elements="path", default=[]),
            sources_list=dict(type="path", default="/etc/apt/sources.list"),
            sources_dir=dict(type="path", default="/etc/apt/sources.list.d"),
            present=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    paths = [params["sources_list"]]
    if os.path.isdir(params["sources_dir"]):
        paths += [os.path.join(params["sources_dir"], name) for name in sorted(os.listdir(params["sources_dir"]))
                  if SOURCE_FILE_NAME.match(name)]
    excluded = set(os.path.normpath(path) for path in params["exclude"])
    found = []
    for path in paths:
        if os.path.normpath(path) in excluded or not os.path.isfile(path):
            continue
        lines = entries_naming(_read(module, path), path.endswith(".sources"), params["uri"], params["arch"])
        if lines:
            found.append(dict(path=path, lines=lines, shown=shown(path, lines)))
    module.exit_json(changed=False, found=found, present=[path for path in params["present"] if os.path.lexists(path)])


if __name__ == "__main__":
    main()
