# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""What the engine's /health says, read the same way by the start's wait, the smoke test and the
fast path (kept apart so the fast path's module imports no more than this)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def health_ok(status, body):
    """Whether the engine's /health says it serves: HTTP 200 and a JSON body whose ``status`` is
    "ok". The contract's healthy answer always has it; an engine that is still loading may answer
    200 with another status, which must not count as up."""
    if status != 200:
        return False
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return False
    return isinstance(body, dict) and body.get("status") == "ok"
