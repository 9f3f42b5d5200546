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
import math
import re
from json.decoder import scanstring

from ansible.module_utils.six import string_types

_WHITESPACE = re.compile(r"[ \t\n\r]*")
DEFAULT_INDENT = "    "  # what dockerd's own docs and nvidia-ctk write
BOM = "\ufeff"  # dockerd (23+) skips a UTF-8 byte order mark; editors on Windows write one


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


def detect_eol(text):
    """The file's line ending: CRLF when its first line ends so, else LF."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def _reject_constant(name):
    raise DaemonConfigError("not valid JSON: %s is not a JSON value (dockerd refuses it)" % name)


def _in_range(kind):
    """A number reader that refuses what a float64 cannot hold (dockerd's Go JSON reader reads every
    number of the file so, and refuses ``1e400`` where Python reads infinity or a long integer)."""
    def read(literal):
        try:
            inside = not math.isinf(float(literal))
        except OverflowError:
            inside = False
        if not inside:
            raise DaemonConfigError("not valid JSON for dockerd: the number %s is out of range" % literal[:40])
        return kind(literal)
    return read


def _parse(text):
    """The document; NaN, Infinity and numbers out of a float64's range, which Python accepts and
    dockerd does not, are refused."""
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_in_range(float),
                          parse_int=_in_range(int))
    except DaemonConfigError:
        raise
    except ValueError as exc:
        raise DaemonConfigError("not valid JSON: %s" % exc)


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


def _insert(text, open_idx, close_idx, members, key, value, unit, eol="\n"):
    """Add "key": value as the last member of the object at open_idx..close_idx."""
    pair_key = json.dumps(key)
    if members:
        last = members[-1]
        indent = _own_line_indent(text, last.key_start)
        if indent is None:  # the object is written on one line: stay on one line
            addition = ", %s: %s" % (pair_key, _render(value, "", None))
        else:
            addition = ",\n%s%s: %s" % (indent, pair_key, _render(value, indent, unit))
        # json.dumps escapes newlines inside strings: every "\n" here is a line break
        return text[:last.value_end] + addition.replace("\n", eol) + text[last.value_end:]
    outer = _leading_ws(text, open_idx)
    inner = outer + unit
    body = "\n%s%s: %s\n%s" % (inner, pair_key, _render(value, inner, unit), outer)
    return text[:open_idx + 1] + body.replace("\n", eol) + text[close_idx:]


def _replace(text, member, value, unit, eol="\n"):
    indent = _own_line_indent(text, member.key_start)
    if isinstance(member.value, (dict, list)) and "\n" not in text[member.value_start:member.value_end]:
        indent = None  # an inline object or array stays inline
    rendered = _render(value, indent if indent is not None else "", unit if indent is not None else None)
    return text[:member.value_start] + rendered.replace("\n", eol) + text[member.value_end:]


def set_member(text, path, value):
    """Return (new_text, changed) with the member at path (a list of keys) set to value.

    Objects on the path that do not exist, or are null (dockerd reads null as empty), are created.
    Everything outside the member's value keeps its bytes; new lines end like the file's (LF or
    CRLF). An empty or whitespace-only text is treated as ``{}`` and written the way dockerd
    documents daemon.json (4-space indentation, trailing newline).
    Raises DaemonConfigError when text is not a JSON object or a step of the path is not an object.
    """
    if not path:
        raise DaemonConfigError("empty path")
    eol = detect_eol(text)
    if text.strip() == "":
        fresh = json.dumps(_nest(path[:-1], {path[-1]: value}), indent=DEFAULT_INDENT) + "\n"
        return fresh.replace("\n", eol), True
    document = _parse(text)
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
            new_text = _insert(text, open_idx, close_idx, members, key, _nest(path[depth + 1:], value), unit, eol)
            break
        if last:
            if member.value == value and type(member.value) is type(value):
                return text, False
            new_text = _replace(text, member, value, unit, eol)
            break
        if member.value is None:
            new_text = _replace(text, member, _nest(path[depth + 1:], value), unit, eol)
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
        if node.get(key) is None:
            node[key] = {}
        node = node[key]
    node[path[-1]] = value
    return result


def runtime_entry(runtime_path, runtime_args=None):
    """A new ``runtimes`` entry: nvidia-ctk's shape, plus ``runtimeArgs`` when there are arguments.

    dockerd reads ``path`` and ``runtimeArgs``; ``args`` is what nvidia-ctk writes (always empty,
    dockerd ignores it), kept so that the entry is the one nvidia-ctk would write.
    """
    entry = {"args": [], "path": runtime_path}
    if runtime_args:
        entry["runtimeArgs"] = list(runtime_args)
    return entry


def _is_bare(path):
    return "/" not in path


def same_runtime_path(wanted, present, resolve=None):
    """Whether dockerd runs the same executable for path wanted and path present.

    Equal strings are the same. A bare name (dockerd looks it up in its PATH) and an absolute path
    are the same when the basenames match and resolve(name) == resolve(absolute): resolve maps a
    path to the file dockerd would execute (None when there is none) and is the caller's, since
    that needs the host. Without resolve only equal strings match.
    """
    if wanted == present:
        return True
    if resolve is None or _is_bare(wanted) == _is_bare(present):
        return False
    name, absolute = (wanted, present) if _is_bare(wanted) else (present, wanted)
    if not absolute.startswith("/") or absolute.rsplit("/", 1)[-1] != name:
        return False
    found = resolve(name)
    return found is not None and found == resolve(absolute)


def _args_of(entry):
    """The entry's runtimeArgs as a list; missing or null is no arguments (dockerd reads them so)."""
    value = entry.get("runtimeArgs")
    return [] if value is None else value


def _get(document, key):
    return document.get(key) if isinstance(document, dict) else None


def merge_runtime(text, name, runtime_path, runtime_args=None, set_default=False, resolve=None):
    """Return (new_text, changed) with runtimes.NAME running runtime_path, and default-runtime
    when set_default.

    An existing entry keeps what is not ours (``runtimeArgs`` when we have no arguments, nvidia-ctk's
    ``args``, any other key): only ``path`` is set when it does not name the same executable (see
    same_runtime_path, with resolve), and ``runtimeArgs`` when arguments are given and differ. So a
    file that already means the same comes back unchanged and Docker need not restart. A UTF-8
    byte order mark at the start is kept.
    """
    bom = BOM if text.startswith(BOM) else ""
    text = text[len(bom):]
    runtime_args = list(runtime_args or [])
    entry_path = ["runtimes", name]
    entry = None
    if text.strip() != "":
        entry = _get(_get(_parse(text), "runtimes"), name)

    if not isinstance(entry, dict):  # absent (or null, which dockerd cannot run): write ours
        new_text, changed = set_member(text, entry_path, runtime_entry(runtime_path, runtime_args))
    else:
        if entry.get("runtimeType") or entry.get("options"):
            # dockerd refuses a path next to these, so adding ours would stop it from starting
            raise DaemonConfigError(
                "runtimes.%s sets runtimeType or options (a containerd shim), which dockerd refuses "
                "together with path; remove them or the whole %s entry" % (name, name))
        new_text, changed = text, False
        present = entry.get("path")
        if not (isinstance(present, string_types) and same_runtime_path(runtime_path, present, resolve)):
            new_text, changed = set_member(new_text, entry_path + ["path"], runtime_path)
        if runtime_args and _args_of(entry) != runtime_args:
            new_text, args_changed = set_member(new_text, entry_path + ["runtimeArgs"], runtime_args)
            changed = changed or args_changed
    if set_default:
        new_text, default_changed = set_member(new_text, ["default-runtime"], name)
        changed = changed or default_changed
    return bom + new_text, changed
