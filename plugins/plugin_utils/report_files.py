# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: write a run's report files into a folder of the controller, each one whole."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.files import write_if_changed


def write_files(folder, files, mode=0o644):
    """Write each ``{name, content}`` of ``files`` into ``folder`` (made when missing, 0755) with
    ``files.write_if_changed``: atomically, so a reader never sees half a report. Returns the
    files' paths, in order. A name with a folder part is refused: the reports stay in their folder."""
    paths = []
    for entry in files:
        name = entry["name"]
        if not name or os.path.basename(name) != name or name in (".", ".."):
            raise ValueError("report file name %r must be a plain file name" % name)
        paths.append(os.path.join(folder, name))
    for path, entry in zip(paths, files):
        if not write_if_changed(path, entry.get("content") or "", mode):
            os.chmod(path, mode)  # the same report again: its mode is still the one asked for
    return paths
