# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Find where apt's sources already name a repository (sources.list(5): one-line ``.list`` files and
deb822 ``.sources`` files).

apt refuses two entries for one repository whose ``Signed-By`` differ ("Conflicting values set for
option Signed-By"), and then fails every command. It compares the repository without its scheme
(an ``http://`` entry conflicts with an ``https://`` one, as does ``mirror+https://``), with
``$(ARCH)`` replaced by the host's architecture and with or without a closing slash.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//)?")
# apt reads only these names in sources.list.d (others, such as .list.save, it ignores).
SOURCE_FILE_NAME = re.compile(r"^[A-Za-z0-9_.-]+\.(list|sources)$")


def repository_key(uri, arch=None):
    """The repository as apt compares it: no scheme, ``$(ARCH)`` resolved, no closing slash."""
    if arch:
        uri = uri.replace("$(ARCH)", arch)
    return _SCHEME.sub("", uri.strip()).rstrip("/")


def one_line_entries(text):
    """``[(line number, uri)]`` of the deb and deb-src lines of a one-line file."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()  # apt drops everything after a '#'
        if not line:
            continue
        kind, rest = (line.split(None, 1) + [""])[:2]
        if kind not in ("deb", "deb-src"):
            continue
        if rest.startswith("["):
            rest = rest.partition("]")[2].strip()
        uri = rest.split()[0] if rest.split() else ""
        if uri:
            entries.append((number, uri))
    return entries


def deb822_entries(text):
    """``[(line number of the stanza, uri)]`` of the enabled stanzas of a ``.sources`` file."""
    entries = []
    stanza, start, field = {}, None, None

    def close():
        if stanza.get("enabled", "yes").strip().lower() not in ("no", "false", "0"):
            for uri in stanza.get("uris", "").split():
                entries.append((start, uri))

    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            if stanza:
                close()
            stanza, start, field = {}, None, None
            continue
        if line[0] in " \t":
            if field:
                stanza[field] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        if not colon:
            continue
        field = name.strip().lower()
        stanza[field] = value.strip()
        if start is None:
            start = number
    if stanza:
        close()
    return entries


def entries_naming(text, deb822, uri, arch=None):
    """The line numbers of the entries of one file's ``text`` that name the repository ``uri``."""
    wanted = repository_key(uri, arch)
    found = deb822_entries(text) if deb822 else one_line_entries(text)
    return [number for number, entry in found if repository_key(entry, arch) == wanted]


def shown(path, lines):
    """One file's entries as a message names them: ``/etc/apt/sources.list (lines 3, 7)``."""
    return "%s (line%s %s)" % (path, "s" if len(lines) > 1 else "", ", ".join(str(line) for line in lines))
