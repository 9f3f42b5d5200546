# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Merge one setting into Docker's daemon.json text without touching anything else.

Operators keep log drivers, registry mirrors, data roots and their own formatting in
``/etc/docker/daemon.json``. ``nvidia-ctk runtime configure`` rewrites the whole file (it parses
and re-serialises it, so key order, indentation and spacing change). The functions here edit the
text instead: they find the exact span of the member to set (for example ``runtimes.nvidia``) and
splice in the new value, so every other byte of the file stays as it was. The result is always
checked to parse to the intended document.

Pure functions, no I/O: the ``docker_daemon_runtime`` module reads and writes the file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from json.decoder import scanstring

_WHITESPACE = re.compile(r"[ \t\n\r]*")
DEFAULT_INDENT = "    "  # what dockerd's own docs and nvidia-ctk write


class DaemonConfigError(ValueError):
    """daemon.json cannot be merged into (not JSON, not an object, or a member of the wrong type)."""


class _Member(object):
    """One ``"key": value`` of a JSON object, with where it sits in the text."""

    def __init__(self, key, key_start, value_start, value_end, value):
        self.key = key
        self.key_start = key_start
        self.value_start = value_start
        self.value_end = value_end
        self.value = value


def _skip_ws(text, idx):
    return _WHITESPACE.match(text, idx).end()


def _scan_object(text, open_idx):
    """Return (members, close_idx) for the object whose ``{`` is at open_idx (text is valid JSON)."""
    decoder = json.JSONDecoder()
    members = []
    idx = _skip_ws(text, open_idx + 1)
    if text[idx] == "}":
        return members, idx
    while True:
        key_start = idx
        key, idx = scanstring(text, idx + 1)
        idx = _skip_ws(text, idx) + 1  # the ':'
        value_start = _skip_ws(text, idx)
        value, idx = decoder.raw_decode(text, value_start)
        members.append(_Member(key, key_start, value_start, idx, value))
        idx = _skip_ws(text, idx)
        if text[idx] == "}":
            return members, idx
        idx = _skip_ws(text, idx + 1)  # past ','


def _find(members, key):
    """The member named key; JSON parsers keep the last of duplicate keys, so do we."""
    found = None
    for member in members:
        if member.key == key:
            found = member
    return found


def _line_start(text, pos):
    return text.rfind("\n", 0, pos) + 1


def _leading_ws(text, pos):
    """The indentation of the line that holds pos."""
    start = _line_start(text, pos)
    return _WHITESPACE.match(text, start).group(0).replace("\n", "").replace("\r", "")


def _own_line_indent(text, pos):
    """The indentation before pos when only whitespace precedes it on its line, else None."""
    start = _line_start(text, pos)
    if start == 0:  # still on the first line, after the opening brace
        return None
    before = text[start:pos]
    return before if before.strip() == "" else None


def detect_indent(text):
    """The file's indentation unit: the indentation of the top-level object's first member."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return DEFAULT_INDENT
    open_idx = len(text) - len(stripped)
    members, dummy = _scan_object(text, open_idx)
    if members:
        indent = _own_line_indent(text, members[0].key_start)
        if indent:
            return indent.replace(_leading_ws(text, open_idx), "", 1) or DEFAULT_INDENT
    return DEFAULT_INDENT


def _render(value, indent, unit):
    """value as JSON text placed at a line indented by indent; unit None means one line."""
    if unit is None:
        return json.dumps(value, separators=(", ", ": "))
    return json.dumps(value, indent=unit).replace("\n", "\n" + indent)


def _nest(path, value):
    """{path[0]: {path[1]: ... value}} for the part of the path that does not exist yet."""
    for key in reversed(path):
        value = {key: value}
    return value


def _insert(text, open_idx, close_idx, members, key, value, unit):
    """Add "key": value as the last member of the object at open_idx..close_idx."""
    pair_key = json.dumps(key)
    if members:
        last = members[-1]
        indent = _own_line_indent(text, last.key_start)
        if indent is None:  # the object is written on one line: stay on one line
            addition = ", %s: %s" % (pair_key, _render(value, "", None))
        else:
            addition = ",\n%s%s: %s" % (indent, pair_key, _render(value, indent, unit))
        return text[:last.value_end] + addition + text[last.value_end:]
    outer = _leading_ws(text, open_idx)
    inner = outer + unit
    body = "\n%s%s: %s\n%s" % (inner, pair_key, _render(value, inner, unit), outer)
    return text[:open_idx + 1] + body + text[close_idx:]


def _replace(text, member, value, unit):
    indent = _own_line_indent(text, member.key_start)
    rendered = _render(value, indent if indent is not None else "", unit if indent is not None else None)
    return text[:member.value_start] + rendered + text[member.value_end:]


def set_member(text, path, value):
    """Return (new_text, changed) with the member at path (a list of keys) set to value.

    Objects on the path that do not exist are created. Everything outside the member's value
    keeps its bytes. An empty or whitespace-only text is treated as ``{}`` and written the way
    dockerd documents daemon.json (4-space indentation, trailing newline).
    Raises DaemonConfigError when text is not a JSON object or a step of the path is not an object.
    """
    if not path:
        raise DaemonConfigError("empty path")
    if text.strip() == "":
        return json.dumps(_nest(path[:-1], {path[-1]: value}), indent=DEFAULT_INDENT) + "\n", True
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise DaemonConfigError("not valid JSON: %s" % exc)
    if not isinstance(document, dict):
        raise DaemonConfigError("the top level is not a JSON object")

    unit = detect_indent(text)
    open_idx = len(text) - len(text.lstrip())
    walked = []
    for depth, key in enumerate(path):
        members, close_idx = _scan_object(text, open_idx)
        member = _find(members, key)
        last = depth == len(path) - 1
        if member is None:
            new_text = _insert(text, open_idx, close_idx, members, key, _nest(path[depth + 1:], value), unit)
            break
        if last:
            if member.value == value and type(member.value) is type(value):
                return text, False
            new_text = _replace(text, member, value, unit)
            break
        if not isinstance(member.value, dict):
            raise DaemonConfigError("%s is not a JSON object" % ".".join(walked + [key]))
        walked.append(key)
        open_idx = member.value_start

    expected = _set_in(document, path, value)
    if json.loads(new_text) != expected:  # a guard: never write what does not parse as intended
        raise DaemonConfigError("the merged text does not parse to the intended document")
    return new_text, True


def _set_in(document, path, value):
    result = json.loads(json.dumps(document))
    node = result
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return result


def runtime_entry(runtime_path, runtime_args=None):
    """The ``runtimes`` entry dockerd reads, keys in the order nvidia-ctk writes them."""
    return {"args": list(runtime_args or []), "path": runtime_path}


def merge_runtime(text, name, runtime_path, runtime_args=None, set_default=False):
    """Return (new_text, changed) with runtimes.NAME set, and default-runtime when set_default."""
    new_text, changed = set_member(text, ["runtimes", name], runtime_entry(runtime_path, runtime_args))
    if set_default:
        new_text, default_changed = set_member(new_text, ["default-runtime"], name)
        changed = changed or default_changed
    return new_text, changed
