# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The smoke test's verdict: what the engine's answers mean, as coded problems.

The smoke_test role sends its requests with ``ansible.builtin.uri`` on the host and hands the
registered results here. Each check reads the HTTP status and body of the engine's OpenAI-compatible
API (docs/smoke_test.md lists the requests and what each answer must hold). A problem quotes the status or the reply that explains it, cut
short, and never a request header (the API key travels in one).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record

EXCERPT = 300


def _status(result):
    try:
        return int((result or {}).get("status", -1))
    except (TypeError, ValueError):
        return -1


def _body(result):
    """The reply's body (parsed JSON when there is some), or None."""
    result = result or {}
    if result.get("json") is not None:
        return result["json"]
    content = result.get("content")
    if content:
        try:
            return json.loads(content)
        except ValueError:
            return content
    return None


def _excerpt(result):
    """What explains a reply: its status and the start of its body, or the client's error."""
    status = _status(result)
    body = _body(result)
    if body is None:
        text = str((result or {}).get("msg") or "no reply")
    else:
        text = body if isinstance(body, str) else json.dumps(body, sort_keys=True)
    if len(text) > EXCERPT:
        text = text[:EXCERPT] + "..."
    if status <= 0:
        return "no HTTP answer: %s" % text
    return "HTTP %d, %s" % (status, text)


def chat_reply(result):
    """The text of a chat completion's first choice, or "" when there is none."""
    body = _body(result)
    if not isinstance(body, dict):
        return ""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    if isinstance(content, list):  # content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def timed_out(result):
    """True when a request got no HTTP answer because the client's timeout ran out."""
    result = result or {}
    return _status(result) <= 0 and "timed out" in str(result.get("msg") or "").lower()


def served_ids(result):
    body = _body(result)
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        return []
    return [entry.get("id") for entry in body["data"] if isinstance(entry, dict)]


def verdict(results, host, endpoint, served_name, vision=False, api_key_set=False):
    """Judge the smoke requests' results.

    ``results`` maps ``health``, ``models``, ``chat`` and, when they were sent, ``vision``,
    ``without_key`` and ``with_key`` to the registered ``uri`` results. Returns
    ``{status: live|failed, endpoint, reply, problems, checks}``; ``checks`` lists each request
    with ``ok`` and what it answered.
    """
    problems, checks = [], []

    def check(name, ok, result, code, what):
        checks.append({"name": name, "ok": bool(ok), "status": _status(result)})
        if not ok:
            problems.append(record(code, host, "%s (%s)" % (what, _excerpt(result)), check=name))
        return ok

    health = results.get("health")
    health_body = _body(health)
    healthy = _status(health) == 200 and isinstance(health_body, dict) and health_body.get("status") == "ok"
    check("health", healthy, health, "E_API", "%s/health did not answer {\"status\":\"ok\"}" % endpoint)

    if not healthy:
        # Nothing else can answer; say so once rather than once per request.
        return {"status": "failed", "endpoint": endpoint, "reply": "", "problems": problems, "checks": checks}

    models = results.get("models")
    ids = served_ids(models)
    check("models", _status(models) == 200 and served_name in ids, models, "E_SMOKE",
          "/v1/models does not list %s (it lists %s)" % (served_name, ", ".join(str(i) for i in ids) or "nothing"))

    chat = results.get("chat")
    reply = chat_reply(chat)
    if timed_out(chat):
        check("chat", False, chat, "E_WEDGED",
              "%s/health answers ok but the chat request got no reply before its timeout: the engine is wedged"
              % endpoint)
    else:
        check("chat", _status(chat) == 200 and reply.strip() != "", chat, "E_SMOKE",
              "the chat request got no reply text")

    if vision:
        image = results.get("vision")
        check("vision", _status(image) == 200 and chat_reply(image).strip() != "", image, "E_SMOKE",
              "the request with an image got no reply text (tensorfold_vision is on)")

    if api_key_set:
        without_key = results.get("without_key")
        check("without_key", _status(without_key) == 401, without_key, "E_SMOKE",
              "a request without the API key was not refused with 401: the key is not enforced")
        with_key = results.get("with_key")
        check("with_key", _status(with_key) == 200, with_key, "E_SMOKE",
              "a request with the API key was not answered with 200")

    return {"status": "failed" if problems else "live", "endpoint": endpoint, "reply": reply,
            "problems": problems, "checks": checks}
