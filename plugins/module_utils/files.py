# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Files a run writes as its output (saved answers, reports): rewritten only when their text changes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def write_if_changed(path, text, mode=0o644):
    """Write ``text`` to ``path`` atomically (a temporary file renamed) unless the file already holds
    exactly it; the folder is made when missing. True when the file was written."""
    try:
        with open(path) as handle:
            if handle.read() == text:
                return False
    except (IOError, OSError):
        pass
    folder = os.path.dirname(path)
    if folder and not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    with open(path + ".tmp", "w") as handle:
        handle.write(text)
    os.chmod(path + ".tmp", mode)
    os.rename(path + ".tmp", path)
    return True
