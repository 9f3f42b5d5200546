#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Register a container runtime in Docker's daemon.json, keeping every other byte of the file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: docker_daemon_runtime
short_description: Register a runtime (such as nvidia) in Docker's daemon.json without rewriting the file
version_added: 0.1.0
description:
  - Sets C(runtimes.NAME) in Docker's C(daemon.json) to an object with C(args) and C(path), the
    entry C(nvidia-ctk runtime configure --runtime=docker) writes, and optionally C(default-runtime).
  - Unlike C(nvidia-ctk), which parses and re-serialises the whole file, this module splices the
    entry into the existing text, so every other key keeps its bytes (order, indentation, spacing,
    inline objects). New text follows the file's own indentation.
  - Creates the file (and its folder) when missing. Does not restart Docker; notify a handler
    when the result is C(changed).
  - A file that is not a JSON object, or whose C(runtimes) is not an object, is left untouched and
    the module fails naming the file.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  path:
    description: Docker's daemon configuration file.
    type: path
    default: /etc/docker/daemon.json
  name:
    description: The runtime's name, as used by C(docker run --runtime NAME).
    type: str
    default: nvidia
  runtime_path:
    description: The runtime executable, an absolute path or a name dockerd finds on its C(PATH).
    type: str
    required: true
  runtime_args:
    description: Arguments dockerd passes to the runtime.
    type: list
    elements: str
    default: []
  set_default:
    description: Also set C(default-runtime) to O(name). When false, C(default-runtime) is left as it is.
    type: bool
    default: false
  mode:
    description: Permissions of the file when it is created; an existing file keeps its own.
    type: raw
    default: "0644"
attributes:
  check_mode:
    description: Reports whether the file would change, and writes nothing.
    support: full
  diff_mode:
    description: Shows the file before and after.
    support: full
notes:
  - The edit is checked before writing, the merged text must parse to the original document plus
    the runtime entry, and the file is replaced atomically.
"""

EXAMPLES = r"""
- name: Register the nvidia runtime with Docker
  glm53.tensorfold.docker_daemon_runtime:
    runtime_path: /usr/bin/nvidia-container-runtime
  notify: Restart docker

- name: Make nvidia Docker's default runtime as well
  glm53.tensorfold.docker_daemon_runtime:
    path: /etc/docker/daemon.json
    name: nvidia
    runtime_path: nvidia-container-runtime
    set_default: true
"""

RETURN = r"""
path:
  description: The file that was checked.
  returned: always
  type: str
  sample: /etc/docker/daemon.json
runtime:
  description: The runtime entry as it is (or would be) in the file.
  returned: always
  type: dict
  sample: {"args": [], "path": "/usr/bin/nvidia-container-runtime"}
created:
  description: Whether the file did not exist before.
  returned: always
  type: bool
  sample: false
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text

from ansible_collections.glm53.tensorfold.plugins.module_utils.docker_daemon_config import (
    DaemonConfigError,
    merge_runtime,
    runtime_entry,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/docker/daemon.json"),
            name=dict(type="str", default="nvidia"),
            runtime_path=dict(type="str", required=True),
            runtime_args=dict(type="list", elements="str", default=[]),
            set_default=dict(type="bool", default=False),
            mode=dict(type="raw", default="0644"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    created = not os.path.exists(path)
    before = ""
    if not created:
        try:
            with open(path, "rb") as handle:
                before = to_text(handle.read(), errors="surrogate_or_strict")
        except (IOError, OSError, UnicodeError) as exc:
            module.fail_json(msg="cannot read %s: %s" % (path, to_native(exc)), path=path)

    try:
        after, changed = merge_runtime(before, params["name"], params["runtime_path"],
                                       params["runtime_args"], params["set_default"])
    except DaemonConfigError as exc:
        module.fail_json(msg="%s cannot be merged into: %s. Fix the file by hand; nothing was changed."
                         % (path, to_native(exc)), path=path)

    result = dict(changed=changed, path=path, created=created,
                  runtime=runtime_entry(params["runtime_path"], params["runtime_args"]))
    if module._diff:
        result["diff"] = dict(before=before, after=after, before_header=path, after_header=path)

    if changed and not module.check_mode:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(to_bytes(after, errors="surrogate_or_strict"))
            module.atomic_move(tmp, path)  # keeps an existing file's owner, mode and context
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if created:
            file_args = module.load_file_common_arguments(dict(path=path, mode=params["mode"]))
            module.set_fs_attributes_if_different(file_args, False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
