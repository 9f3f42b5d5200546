# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""What a snapshot's state folder records (hf_transfer.py describes the layout), read without the
transfer's code: the read-only modules (the fast path's converged_info, the host checks'
host_resources) import only this, so their payload and each run's import on the box stay small."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

UNSYNCED = "verified-unsynced.json"


def load_json(path, default=None):
    """A JSON file's content, or ``default`` when it is missing or does not parse."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return default


def boot_id():
    """This boot's id (Linux), or None where there is none: then every file is fsynced before
    its verification is recorded."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip() or None
    except (IOError, OSError):
        return None


def unsynced_records(state_dir):
    """The verifications made in this boot whose files may not be on the disk yet (empty after a
    reboot: a power cut may have lost their bytes, so they are hashed again)."""
    data = load_json(os.path.join(state_dir, UNSYNCED), None)
    current = boot_id()
    if not isinstance(data, dict) or not current or data.get("boot_id") != current:
        return {}
    return dict(data.get("records") or {})


def load_records(state_dir):
    """The verifications that hold: ``verified.json`` plus this boot's unsynced ones; None when
    neither file is readable."""
    records = load_json(os.path.join(state_dir, "verified.json"), None)
    unsynced = unsynced_records(state_dir)
    if records is None and not unsynced:
        return None
    merged = dict(records or {})
    merged.update(unsynced)
    return merged


def recorded_state(state_dir, revision):
    """What a snapshot's state folder records for ``revision``: ``(listing, records)``, the
    ``listing-COMMIT.json`` and the verifications that hold (``load_records``), each None when
    missing or unreadable."""
    return (load_json(os.path.join(state_dir, "listing-%s.json" % revision)), load_records(state_dir))
