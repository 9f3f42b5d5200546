# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Is a service box (the gateway, Prometheus) still what its last converge left?

The run renders what it wants (each file's content, the inputs it was built from, such as the
gateway's backends this run) and asks once: the record written after the last successful converge
holds the same fingerprint (``record``), every file on the box holds what the run would write, or
is absent when it must be (``files``), and the service answers (``service``). Pure apart from
reading the files; the module asks the service.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

PARTS = ("record", "files", "service")


def _sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_file(path):
    """A file's text (UTF-8), or None when it is absent or cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def fingerprint(files, inputs):
    """One sha256 of what the run wants: each file's path and content (or absence) and the inputs.
    A file marked ``secret`` enters by its path and presence only: a fingerprint that covered a key
    would let whoever sees it (a -v run's output, the record) test guesses of the key offline.
    Its content is still compared on the box (compare's ``files`` part)."""
    def part(f):
        if f.get("content") is None:
            return None
        return "secret" if f.get("secret") else _sha256(f["content"])

    data = {"files": sorted([f["path"], part(f)] for f in files), "inputs": inputs}
    return _sha256(json.dumps(data, sort_keys=True, default=str))


def compare(want_fingerprint, record, files, on_disk, service, record_mode=None):
    """Differences; an empty list means converged.

    record: the record the last converge wrote ({"fingerprint": ...}) or None. files: the wanted
    files ({path, content}; content None: must be absent). on_disk: path -> its content, or None
    when absent. service: {ok, what} of the probe, or None when not asked. record_mode: the
    record's permission bits, or None when not known.
    Returns a list of {part, what}, in PARTS order, at most one entry per part.
    """
    differs = {}
    if not record or not record.get("fingerprint"):
        differs["record"] = "no record of a completed converge"
    elif record["fingerprint"] != want_fingerprint:
        differs["record"] = "the run wants %s, the last converge left %s" % (
            want_fingerprint[:12], str(record["fingerprint"])[:12])
    elif record_mode is not None and record_mode & 0o077:
        # The record stays root's: records of older releases covered the key file's content, and
        # the fingerprint still covers what the configuration says. A converge rewrites it 0600.
        differs["record"] = "the record is readable by others (mode %04o)" % (record_mode & 0o7777)
    changed = []
    for wanted in files:
        have = on_disk.get(wanted["path"])
        if wanted.get("content") is None:
            if have is not None:
                changed.append("%s is present" % wanted["path"])
        elif have is None:
            changed.append("%s is missing" % wanted["path"])
        elif have != wanted["content"]:
            changed.append("%s differs" % wanted["path"])
    if changed:
        differs["files"] = "; ".join(changed)
    if service is not None and not service.get("ok"):
        differs["service"] = service.get("what") or "the service does not answer"
    return [{"part": part, "what": differs[part]} for part in PARTS if part in differs]


def summary(differs):
    if not differs:
        return "converged"
    return "differs: " + "; ".join("%s (%s)" % (d["part"], d["what"]) for d in differs)
