# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Read ``apt-cache madison`` output: which NAME=VERSION pairs apt can install; and
``dpkg-query``'s selections: which packages are held.

A line of madison output is ``NAME | VERSION | URI SUITE[/COMPONENT] ARCH-OR-Sources``; the
columns are padded with spaces. Source-package lines (ending in ``Sources``) are skipped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def madison_pairs(lines):
    """Return ["NAME=VERSION", ...] for the binary packages in madison output, in its order."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    pairs = []
    for line in lines:
        columns = [column.strip() for column in line.split("|")]
        if len(columns) != 3 or not columns[0] or not columns[1]:
            continue
        if columns[2].endswith(" Sources"):
            continue
        pair = "%s=%s" % (columns[0], columns[1])
        if pair not in pairs:
            pairs.append(pair)
    return pairs


def held_packages(lines, packages):
    """The ``packages`` that ``dpkg-query -W -f '${Package}\\t${db:Status-Want}\\n'`` output says are
    on hold, in ``packages``' order (a package dpkg does not know is not held)."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    held = set()
    for line in lines:
        columns = line.split("\t")
        if len(columns) == 2 and columns[1].strip() == "hold":
            held.add(columns[0].strip().split(":")[0])
    return [name for name in packages if name in held]
