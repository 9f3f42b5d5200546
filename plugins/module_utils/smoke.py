# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The smoke test: its requests, what the engine's answers mean (coded problems), what it saves.

The engine_smoke module (run by the smoke_test role on the host; ``run_module``) sends every request
through ``send_requests`` with a ``fetch`` function (``box_fetch``), judges the answers with
``verdict`` and writes ``saved_files``. Standard library only: where the connection pipelines its
action sends this file and READER_MODULES to the host's own Python instead of a module (``on_box``).
Each check reads the HTTP status and body of the engine's OpenAI-compatible API (docs/smoke_test.md
lists the requests and what each answer must hold). A problem quotes the status or the reply that
explains it, cut short, and never a request header (the API key travels in one). An answer is a
dict ``{status, content, json, msg}``: the HTTP status (-1 when none came), the body, the parsed
body, the client's error.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from http.client import IncompleteRead

from ansible_collections.glm53.tensorfold.plugins.module_utils import box_module
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record
from ansible_collections.glm53.tensorfold.plugins.module_utils.files import write_if_changed
from ansible_collections.glm53.tensorfold.plugins.module_utils.health import health_ok, health_ready, says_warming, warming
from ansible_collections.glm53.tensorfold.plugins.module_utils.net import http_request
from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke_png import png_data_url

# Every module_utils file the smoke test imports, itself first: what the box reader sends to the host.
READER_MODULES = ("smoke", "box_module", "codes", "files", "health", "net", "smoke_png")

EXCERPT = 300
# Each request names itself, so an engine's logs tell the smoke test's requests apart.
USER_AGENT = "glm53-smoke-test"


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
    healthy = health_ok(_status(health), health_body)
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
        # /health's "warming" (no keys configured) says a first slow answer may be warm-up, not a wedge;
        # with keys /health answers only its status and cannot say either way.
        if warming(health_body):
            why = (" (its /health also said it was still warming up: raise smoke_test_timeout if a first request "
                   "after a start may take that long)")
        elif api_key_set and says_warming(health_body) is None:
            why = (" (with API keys /health answers only its status and cannot say whether the engine still warms "
                   "up: after a start that the rank_container role did not wait for, such as Docker's own restart, "
                   "raise smoke_test_timeout if a first request may take that long)")
        else:
            why = ""
        check("chat", False, chat, "E_WEDGED",
              "%s/health answers ok but the chat request got no reply before its timeout: the engine is wedged%s"
              % (endpoint, why))
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


def smoke_requests(url, served_name, vision=True, api_key_set=False, max_tokens=32):
    """The smoke test's requests, one line each (the API key is never shown): check mode and the plan."""
    url = str(url).rstrip("/")
    auth = " (Authorization: Bearer <key>)" if api_key_set else ""
    lines = ["GET %s/health" % url,
             "GET %s/v1/models%s: expects %s listed" % (url, auth, served_name),
             "POST %s/v1/chat/completions%s: model %s, temperature 0, enable_thinking false, max_tokens %s, "
             "expects a non-empty reply" % (url, auth, served_name, max_tokens)]
    if vision:
        lines.append("POST %s/v1/chat/completions%s: a text part and an image_url part "
                     "(a generated PNG as a data URL), expects a non-empty reply" % (url, auth))
    if api_key_set:
        lines.append("GET %s/v1/models without a key: expects 401" % url)
        lines.append("GET %s/v1/models with the key: expects 200" % url)
    return lines


def chat_body(served_name, content, max_tokens):
    """A chat completion request as the recipe's smoke test sends it: temperature 0, thinking off."""
    return {"model": served_name, "messages": [{"role": "user", "content": content}], "temperature": 0,
            "max_tokens": int(max_tokens), "stream": False, "chat_template_kwargs": {"enable_thinking": False}}


def vision_content(prompt, image_size):
    """A user message of a text part and an image_url part holding a generated PNG."""
    return [{"type": "text", "text": prompt},
            {"type": "image_url", "image_url": {"url": png_data_url(image_size)}}]


def send_requests(fetch, url, served_name, prompt, max_tokens=32, vision=False, image_prompt="", image_size=8,
                  api_key="", health_tries=5, health_delay=3, sleep=None):
    """Send the smoke requests with ``fetch(method, url, body=None, key=None)`` (an answer dict back).

    ``/health`` is asked up to ``health_tries`` times, ``health_delay`` seconds apart, until it
    answers 200 with ``{"status": "ok"}`` and no ``"warming": true`` (``health_ready``). The API
    requests go once it says ok, warmed up or, when the tries ran out, still warming (``verdict``
    then names the warm-up), each sent whatever the one before answered, so one run shows every
    wrong answer. Returns the answers by name, as ``verdict`` reads them.
    """
    url = str(url).rstrip("/")
    answers = {}
    tries = max(1, int(health_tries))
    for number in range(tries):
        answers["health"] = fetch("GET", url + "/health")
        if health_ready(_status(answers["health"]), _body(answers["health"])):
            break
        if number + 1 < tries and sleep is not None:
            sleep(health_delay)
    if not health_ok(_status(answers["health"]), _body(answers["health"])):
        return answers
    key = api_key or None
    answers["models"] = fetch("GET", url + "/v1/models", key=key)
    answers["chat"] = fetch("POST", url + "/v1/chat/completions", chat_body(served_name, prompt, max_tokens), key=key)
    if vision:
        answers["vision"] = fetch("POST", url + "/v1/chat/completions",
                                  chat_body(served_name, vision_content(image_prompt, image_size), max_tokens), key=key)
    if api_key:
        answers["without_key"] = fetch("GET", url + "/v1/models")
        answers["with_key"] = fetch("GET", url + "/v1/models", key=key)
    return answers


def nice_json(value):
    """JSON the way the saved files are written: indented, keys sorted, a final newline."""
    return json.dumps(value, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def saved_files(judged, answers, url, served_name):
    """The files saved in the session's log folder, name to text: ``smoke.json`` (the verdict, the
    URL and the model) and, when it was asked, ``models.json`` (the /v1/models reply, or its status).
    Neither holds a request header or a time stamp, so the same answers write the same text."""
    files = {"smoke.json": nice_json(dict(judged, url=str(url).rstrip("/"), model=served_name))}
    if "models" in answers:
        body = _body(answers["models"])
        files["models.json"] = nice_json(body if isinstance(body, (dict, list)) and body
                                         else {"status": _status(answers["models"])})
    return files


def box_fetch(timeout, request=http_request):
    """A ``fetch`` for ``send_requests``: straight from the box to the URL (no proxy, no redirect,
    an https certificate checked), with the agent's name and the key in a header.

    An HTTP error keeps its status and body (a 401 quotes the engine's reason); no answer at all is
    status -1 with the client's error, which says "timed out" when the timeout ran out."""

    def fetch(method, url, body=None, key=None):
        headers = {"User-Agent": USER_AGENT}
        if key:
            headers["Authorization"] = "Bearer " + key
        data = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode("utf-8")
        try:
            status, reason, content = request(method, url, timeout, body=data, headers=headers, verify=True)
        except IncompleteRead as error:  # an answer came, then the connection closed early
            return {"status": getattr(error, "status", -1), "content": "",
                    "msg": "the body was cut short after %d bytes (%d more expected)"
                           % (len(error.partial or b""), error.expected or 0)}
        except Exception as error:  # pylint: disable=broad-except  # every client failure is an answer to judge
            return {"status": -1, "msg": "Request failed: %s" % (error if str(error) else type(error).__name__)}
        content = content.decode("utf-8", "replace")
        if status >= 400:
            return {"status": status, "content": content, "msg": "HTTP Error %d: %s" % (status, reason)}
        return {"status": status, "content": content}

    return fetch


def run_module(module):
    """The engine_smoke module's whole run: ``module`` is its AnsibleModule, or box_module's stand-in
    when the action sends this file to the host (``on_box``); either ends in exit_json or fail_json."""
    p = module.params
    url = p["url"].rstrip("/")
    endpoint = p["endpoint"] if p["endpoint"] is not None else url
    if not 1 <= p["image_size"] <= 256:
        module.fail_json(msg="image_size must be from 1 to 256 pixels, not %d" % p["image_size"])
    requests = smoke_requests(url, p["served_name"], p["vision"], bool(p["api_key"]), p["max_tokens"])
    if module.check_mode:
        module.exit_json(changed=False, requests=requests, saved=[],
                         verdict={"status": "planned", "endpoint": endpoint, "reply": "", "problems": [], "checks": []})
    answers = send_requests(box_fetch(p["timeout"]), url, p["served_name"], p["prompt"], p["max_tokens"],
                            p["vision"], p["image_prompt"], p["image_size"], p["api_key"],
                            p["health_tries"], p["health_delay"], sleep=time.sleep)
    judged = verdict(answers, p["host"], url, p["served_name"], p["vision"], bool(p["api_key"]))
    judged["endpoint"] = endpoint
    changed, saved = False, []
    if p["save_dir"] and os.path.isdir(p["save_dir"]):
        for name, text in sorted(saved_files(judged, answers, url, p["served_name"]).items()):
            changed = write_if_changed(os.path.join(p["save_dir"], name), text) or changed
            saved.append(os.path.join(p["save_dir"], name))
    module.exit_json(changed=changed, verdict=judged, requests=requests, saved=saved)


def on_box(params):
    """engine_smoke's answer, run by the box reader with the host's Python (never in check mode)."""
    return box_module.answer(run_module, params)
