# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""How the engine's rank0.log reads where the fast path looks: terminal escapes removed
(``clean``), and its startup line, which says how many streams and what window it serves
(``parse_startup``). context_fit.py reads the same log's refusals with the same pieces.

Apart from context_fit because the box reader (plugin_utils/box_reader.py) sends converged_info's
files to every box in every run, and the box compiles each one it is sent: this is the part of
context_fit that read needs (docs/development.md, "The fast path's read on the box, lighter")."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# A figure as the engine prints it: a decimal (GiB), a count with optional thousands separators.
NUM = r"([0-9]+(?:\.[0-9]+)?)"
INT = r"([0-9][0-9,_]*)"

STARTUP = re.compile(
    r"CUDA [^\n]*?: model " + NUM + r" GiB; " + INT + r" streams? at once, " + NUM
    + r" GiB each at an? " + INT + r"-token window, of " + NUM + r" GiB left[^\n]*")
# Terminal escapes (colour, cursor) a logger or a wrapper may add, even inside a figure.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def count(text):
    """A count as printed (``262,144``, ``262_144``) as an int."""
    return int(text.replace(",", "").replace("_", ""))


def clean(text):
    """The log without terminal escapes, with one line break per line (CR LF, a lone CR)."""
    return _ANSI.sub("", text or "").replace("\r\n", "\n").replace("\r", "\n")


def parse_startup(text):
    """Return (streams, window) from the engine's last startup line, or (None, None)."""
    found = None
    for found in STARTUP.finditer(clean(text)):
        pass
    if found is None:
        return None, None
    return count(found.group(2)), count(found.group(4))
