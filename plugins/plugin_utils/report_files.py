# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Controller-side: write a run's report files into a folder of the controller, each one whole."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile


def write_files(folder, files, mode=0o644):
    """Write each ``{name, content}`` of ``files`` into ``folder`` (made when missing, 0755).

    Each file is written beside its final name and renamed over it, so a reader never sees half a
    report. Returns the paths written, in order. A name with a folder part is refused: the reports
    stay in their folder."""
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    written = []
    for entry in files:
        name = entry["name"]
        if not name or os.path.basename(name) != name or name in (".", ".."):
            raise ValueError("report file name %r must be a plain file name" % name)
        path = os.path.join(folder, name)
        handle, tmp = tempfile.mkstemp(dir=folder, prefix="." + name + ".")
        try:
            with os.fdopen(handle, "wb") as out:
                content = entry.get("content") or ""
                out.write(content.encode("utf-8") if not isinstance(content, bytes) else content)
            os.chmod(tmp, mode)
            os.rename(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        written.append(path)
    return written
