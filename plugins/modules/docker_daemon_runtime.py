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
  - Sets C(runtimes.NAME) in Docker's C(daemon.json) so that dockerd runs O(runtime_path) (with
    O(runtime_args) as C(runtimeArgs)), and optionally C(default-runtime).
  - A new entry is the one C(nvidia-ctk runtime configure --runtime=docker) writes, C(args) (which
    dockerd ignores) and C(path), plus C(runtimeArgs) when O(runtime_args) is set.
  - An existing entry is edited, not replaced. Only C(path) and, with O(runtime_args),
    C(runtimeArgs) are set, and only when they differ; C(args), any other key, and C(runtimeArgs)
    when O(runtime_args) is empty, stay.
  - An entry that already means the same is left alone (no change, so no Docker restart), such as
    nvidia-ctk's bare C(nvidia-container-runtime) when that name is found on systemd's default C(PATH)
    (dockerd's; not the module's own, which may hold folders dockerd never searches) as
    O(runtime_path), or a missing, null or empty C(runtimeArgs).
  - Unlike C(nvidia-ctk), which parses and re-serialises the whole file, this module splices the
    entry into the existing text, so every other key keeps its bytes (order, indentation, spacing,
    inline objects, a UTF-8 byte order mark). New text follows the file's own indentation and line
    endings (LF or CRLF).
  - Creates the file (and its folder) when missing. A symbolic link stays a link; its target is
    written (or created). Does not restart Docker; notify a handler when the
    result is C(changed).
  - A file that is not a JSON object (or holds C(NaN) or C(Infinity), which dockerd refuses), whose
    C(runtimes) is not an object, or whose entry for O(name) sets C(runtimeType) or C(options)
    (dockerd refuses those next to C(path)), is left untouched and the module fails naming the file.
    So does a UTF-16 file. A null C(runtimes) counts as an empty object, as dockerd reads it.
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
    description:
      - Arguments dockerd passes to the runtime, written as the entry's C(runtimeArgs).
      - Empty leaves an existing entry's C(runtimeArgs) as it is.
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
  dockerd_config_file:
    description:
      - The daemon.json the running dockerd read (its C(--config-file), C(/etc/docker/daemon.json) without one),
        as M(glm53.tensorfold.host_resources) reports it. When set and it is not O(path) (symbolic links
        resolved), the module fails naming both and changes nothing, since dockerd would never read the edit
        (a C(--config-file) in its unit or drop-in; the snap's C(/var/snap/docker/current/config/daemon.json)).
    type: path
  host:
    description: The host's name in the failure of O(dockerd_config_file) (C([E_DOCKER] host:) ...).
    type: str
    default: localhost
  backup:
    description:
      - Before changing an existing file, copy it next to itself (owner and mode kept) and return the copy as
        RV(backup_file), so that a dockerd that refuses the new file can be given the old one back.
    type: bool
    default: false
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
  - dockerd reads C(runtimeArgs), not C(args); C(args) is only nvidia-ctk's (always empty).
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
target:
  description: The file read and written, O(path) with symbolic links resolved.
  returned: always
  type: str
  sample: /etc/docker/daemon.json
created:
  description: Whether the file did not exist before.
  returned: always
  type: bool
  sample: false
backup_file:
  description: The copy of the file as it was, with O(backup) when an existing file changed.
  returned: changed and O(backup), not in check mode
  type: str
  sample: /etc/docker/daemon.json.4242.2026-12-06@02:40:00~
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.docker_daemon_config import (
    BOM,
    DaemonConfigError,
    merge_runtime,
)

# systemd's default PATH, the one dockerd gets as docker.service
SYSTEMD_PATH = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def resolve_executable(path):
    """The real file dockerd would run for path (a bare name is looked up on dockerd's PATH, in its
    order), or None."""
    candidates = [path] if "/" in path else [os.path.join(d, path) for d in SYSTEMD_PATH]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/docker/daemon.json"),
            name=dict(type="str", default="nvidia"),
            runtime_path=dict(type="str", required=True),
            runtime_args=dict(type="list", elements="str", default=[]),
            set_default=dict(type="bool", default=False),
            mode=dict(type="raw", default="0644"),
            backup=dict(type="bool", default=False),
            dockerd_config_file=dict(type="path"),
            host=dict(type="str", default="localhost"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    # Write through a symbolic link (a dangling one too): replacing the link would detach the
    # file from wherever the operator keeps it.
    target = os.path.realpath(path)
    read_by_dockerd = params["dockerd_config_file"]
    if read_by_dockerd and os.path.realpath(read_by_dockerd) != target:
        snap = "/snap/" in read_by_dockerd
        module.fail_json(msg=problem(
            "E_DOCKER", params["host"],
            "the running dockerd reads %s%s, not %s, so the nvidia runtime would never reach it; nothing was changed"
            % (read_by_dockerd, " (Docker here is the snap)" if snap else " (its --config-file)", path),
            "Docker's snap brings its own NVIDIA support (snap get docker nvidia-support) and its dockerd does not run "
            "the host's toolkit: use Docker Engine from packages (snap remove docker), or skip this role where "
            "docker run --gpus all already works." if snap else
            "Set nvidia_toolkit_daemon_json to %s and run again." % read_by_dockerd),
            path=path, dockerd_config_file=read_by_dockerd)
    created = not os.path.exists(target)
    before = ""
    if not created:
        try:
            with open(target, "rb") as handle:
                raw = handle.read()
            if raw.startswith(UTF16_BOMS):
                module.fail_json(msg="%s is UTF-16 encoded (it starts with a UTF-16 byte order mark); this module "
                                     "edits UTF-8 only. Convert it (iconv -f UTF-16 -t UTF-8) and run again; "
                                     "nothing was changed." % path, path=path)
            before = to_text(raw, errors="surrogate_or_strict")
        except (IOError, OSError, UnicodeError) as exc:
            module.fail_json(msg="cannot read %s: %s" % (path, to_native(exc)), path=path)

    try:
        after, changed = merge_runtime(before, params["name"], params["runtime_path"],
                                       params["runtime_args"], params["set_default"],
                                       resolve=resolve_executable)
    except DaemonConfigError as exc:
        module.fail_json(msg="%s cannot be merged into: %s. Fix the file by hand; nothing was changed."
                         % (path, to_native(exc)), path=path)

    entry = json.loads(after[len(BOM):] if after.startswith(BOM) else after)["runtimes"][params["name"]]
    result = dict(changed=changed, path=path, target=target, created=created, runtime=entry)
    if module._diff:
        result["diff"] = dict(before=before, after=after, before_header=target, after_header=target)

    if changed and not module.check_mode:
        folder = os.path.dirname(target) or "."
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
        if params["backup"] and not created:
            result["backup_file"] = module.backup_local(target)
        fd, tmp = tempfile.mkstemp(prefix=".daemon.json.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(to_bytes(after, errors="surrogate_or_strict"))
            module.atomic_move(tmp, target)  # keeps an existing file's owner, mode and context
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        if created:
            file_args = module.load_file_common_arguments(dict(path=target, mode=params["mode"]))
            module.set_fs_attributes_if_different(file_args, False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
