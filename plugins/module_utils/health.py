# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""What the engine's /health says, read the same way by the start's wait, the smoke test and the
fast path (kept apart so the fast path's module imports no more than this)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def _parsed(body):
    """The /health body as a dict, or None when it is not a JSON object."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    return body if isinstance(body, dict) else None


def health_ok(status, body):
    """Whether the engine's /health says it serves: HTTP 200 and a JSON body whose ``status`` is
    "ok". The contract's healthy answer always has it; an engine that is still loading may answer
    200 with another status, which must not count as up."""
    return status == 200 and (_parsed(body) or {}).get("status") == "ok"


def says_warming(body):
    """/health's ``warming`` as a bool, or None when the answer has no such field (the answer with
    API keys, ``{"status":"ok"}``, cannot say whether the engine still warms up)."""
    value = (_parsed(body) or {}).get("warming")
    return value if isinstance(value, bool) else None


def warming(body):
    """Whether /health says the engine still warms up (``"warming": true``). Only the answer without
    API keys has the field; an answer without it is not warming."""
    return says_warming(body) is True


def health_ready(status, body):
    """Whether /health says the engine serves and has warmed up: what a start and the smoke test
    wait for (within their own time), so neither sends its first request into the warm-up."""
    return health_ok(status, body) and not warming(body)


def readiness_request(model):
    """The smallest request that shows the engine serves: one token, thinking off, temperature 0
    (the contract's chat completion)."""
    return {"model": model, "messages": [{"role": "user", "content": "ready?"}], "max_tokens": 1,
            "temperature": 0, "stream": False, "chat_template_kwargs": {"enable_thinking": False}}
