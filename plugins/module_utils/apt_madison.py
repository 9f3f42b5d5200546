# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Read ``apt-cache madison`` output: which NAME=VERSION pairs apt can install; and
``dpkg-query``'s selections: which packages are held.

A line of madison output is ``NAME | VERSION | URI SUITE[/COMPONENT] ARCH-OR-Sources``; the
columns are padded with spaces. Source-package lines (ending in ``Sources``) are skipped.
``madison_error`` tells an answer from a failure to read apt's sources.
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


def madison_error(rc, err):
    """None when ``apt-cache madison`` answered, else what apt said. It exits 0 with no lines for a
    package no source offers; a non-zero exit means apt could not read its sources or cache (exit
    100, empty stdout), so an empty answer then says nothing about the packages."""
    if rc == 0:
        return None
    lines = [line.strip() for line in (err or "").splitlines() if line.strip()]
    # apt repeats its errors (once per attempt to read the sources): each once, in order.
    said = []
    for line in lines:
        if line not in said:
            said.append(line)
    return "apt-cache madison exited %s: %s" % (rc, " ".join(said) if said else "it printed no message")
