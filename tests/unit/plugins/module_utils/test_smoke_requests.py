# -*- coding: utf-8 -*-
"""The smoke test's requests: what is sent, in which order, when; what is saved; the HTTP client's
answers for a reply, an HTTP error and no answer at all."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import (
    USER_AGENT, chat_body, health_ok, saved_files, send_requests, smoke_requests, box_fetch, verdict)
from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke_png import PNG_SIGNATURE

URL = "http://127.0.0.1:8020"
KEY = "smoke-unit-canary-7731"
HEALTH = {"status": 200, "content": '{"status":"ok"}'}
MODELS = {"status": 200, "content": '{"object":"list","data":[{"id":"GLM-5.3-Flash","object":"model"}]}'}
CHAT = {"status": 200, "content": '{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello."}}]}'}
UNAUTHORIZED = {"status": 401, "content": '{"error":{"message":"A valid API key is required","code":"invalid_api_key"}}'}


class Engine(object):
    """A fetch that answers as the engine contract says, and records what it was sent."""

    def __init__(self, health=None, key=None):
        self.health = list(health or [HEALTH])
        self.key = key
        self.sent = []

    def __call__(self, method, url, body=None, key=None):
        self.sent.append((method, url[len(URL):], body, key))
        path = url[len(URL):]
        if path == "/health":
            return self.health.pop(0) if len(self.health) > 1 else self.health[0]
        if self.key and key != self.key:
            return UNAUTHORIZED
        return MODELS if path == "/v1/models" else CHAT


def test_without_vision_or_key_three_requests_go_in_order():
    engine = Engine()
    answers = send_requests(engine, URL + "/", "GLM-5.3-Flash", "Say hello.", max_tokens=16)
    assert [sent[:2] for sent in engine.sent] == [
        ("GET", "/health"), ("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    assert sorted(answers) == ["chat", "health", "models"]
    assert engine.sent[2][2] == chat_body("GLM-5.3-Flash", "Say hello.", 16)
    assert engine.sent[2][2]["temperature"] == 0 and engine.sent[2][2]["chat_template_kwargs"] == {"enable_thinking": False}
    assert verdict(answers, "h", URL, "GLM-5.3-Flash")["status"] == "live"


def test_vision_sends_a_text_part_and_a_png_data_url():
    engine = Engine()
    send_requests(engine, URL, "GLM-5.3-Flash", "hi", vision=True, image_prompt="Which colours?", image_size=4)
    method, path, body = engine.sent[3][:3]
    assert (method, path) == ("POST", "/v1/chat/completions")
    text, image = body["messages"][0]["content"]
    assert text == {"type": "text", "text": "Which colours?"}
    prefix = "data:image/png;base64,"
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(image["image_url"]["url"][len(prefix):]).startswith(PNG_SIGNATURE)


def test_with_a_key_every_api_request_carries_it_but_the_one_that_must_be_refused():
    engine = Engine(key=KEY)
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", api_key=KEY)
    assert [(sent[1], sent[3]) for sent in engine.sent] == [
        ("/health", None), ("/v1/models", KEY), ("/v1/chat/completions", KEY), ("/v1/models", None), ("/v1/models", KEY)]
    assert verdict(answers, "h", URL, "GLM-5.3-Flash", api_key_set=True)["status"] == "live"


def test_health_is_asked_again_until_200_with_the_delay_between():
    slept = []
    engine = Engine(health=[{"status": -1, "msg": "Request failed: [Errno 111] Connection refused"},
                            {"status": 503, "content": ""}, HEALTH])
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", health_tries=5, health_delay=3, sleep=slept.append)
    assert slept == [3, 3] and answers["health"] == HEALTH and "chat" in answers


def test_health_down_after_every_try_sends_nothing_else():
    slept = []
    down = {"status": -1, "msg": "Request failed: [Errno 111] Connection refused"}
    engine = Engine(health=[down])
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", health_tries=2, health_delay=1, sleep=slept.append)
    assert [sent[1] for sent in engine.sent] == ["/health", "/health"] and slept == [1]
    assert sorted(answers) == ["health"]
    judged = verdict(answers, "h", URL, "GLM-5.3-Flash")
    assert [p["code"] for p in judged["problems"]] == ["E_API"] and "Connection refused" in judged["problems"][0]["message"]


def test_saved_files_hold_the_verdict_and_the_models_reply_and_never_the_key():
    engine = Engine(key=KEY)
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", api_key=KEY)
    judged = verdict(answers, "h", URL, "GLM-5.3-Flash", api_key_set=True)
    files = saved_files(judged, answers, URL + "/", "GLM-5.3-Flash")
    assert sorted(files) == ["models.json", "smoke.json"]
    assert json.loads(files["models.json"])["data"][0]["id"] == "GLM-5.3-Flash"
    smoke = json.loads(files["smoke.json"])
    assert smoke["status"] == "live" and smoke["url"] == URL and smoke["model"] == "GLM-5.3-Flash"
    assert all(KEY not in text for text in files.values())
    # The same answers give the same text: a second run rewrites nothing.
    assert files == saved_files(judged, answers, URL, "GLM-5.3-Flash")


def test_models_json_is_its_status_when_the_reply_is_no_json_and_absent_when_not_asked():
    answers = {"health": HEALTH, "models": {"status": 500, "content": "Internal error"}, "chat": CHAT}
    files = saved_files(verdict(answers, "h", URL, "M"), answers, URL, "M")
    assert json.loads(files["models.json"]) == {"status": 500}
    answers = {"health": {"status": -1, "msg": "refused"}}
    assert sorted(saved_files(verdict(answers, "h", URL, "M"), answers, URL, "M")) == ["smoke.json"]


def test_plan_lines_follow_vision_and_key_and_never_show_it():
    assert len(smoke_requests("http://h:1", "M", vision=False)) == 3
    lines = smoke_requests("http://h:1/", "M", vision=True, api_key_set=True)
    assert len(lines) == 6 and lines[0] == "GET http://h:1/health"
    assert lines[4] == "GET http://h:1/v1/models without a key: expects 401"
    assert "Bearer <key>" in lines[1]


class EngineServer(object):
    """An HTTP server on loopback whose every answer is ``answer(handler) -> (status, body bytes,
    headers)``; it records each request's method, path, headers and body."""

    def __init__(self, answer):
        self.seen = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                server.seen.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
                status, body, headers = answer(self)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _any

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_box_fetch_sends_json_with_the_agent_and_the_key_in_a_header(monkeypatch):
    # A proxy in the environment that does not exist: the requests go straight to the box.
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    server = EngineServer(lambda handler: (200, b'{"status":"ok"}', {}))
    try:
        answer = box_fetch(7)("POST", server.url + "/v1/chat/completions", {"a": 1}, key=KEY)
        assert answer == {"status": 200, "content": '{"status":"ok"}'}
        method, path, headers, body = server.seen[0]
        assert method == "POST" and path == "/v1/chat/completions" and json.loads(body) == {"a": 1}
        assert headers["Authorization"] == "Bearer " + KEY and headers["Content-Type"] == "application/json"
        assert headers["User-Agent"] == USER_AGENT
        box_fetch(7)("GET", server.url + "/health")
        method, path, headers, body = server.seen[1]
        assert method == "GET" and "Authorization" not in headers and "Content-Type" not in headers and body == b""
    finally:
        server.close()


def test_box_fetch_keeps_an_http_errors_status_and_body():
    server = EngineServer(lambda handler: (401, UNAUTHORIZED["content"].encode(), {}))
    try:
        answer = box_fetch(5)("GET", server.url + "/v1/models")
    finally:
        server.close()
    assert answer["status"] == 401 and "invalid_api_key" in answer["content"]
    assert answer["msg"] == "HTTP Error 401: Unauthorized"


def test_box_fetch_of_a_body_cut_short_keeps_the_status():
    def cut(handler):
        handler.close_connection = True
        return 200, b'{"choices":', {"Content-Length": "100"}

    server = EngineServer(cut)
    try:
        answer = box_fetch(5)("POST", server.url + "/v1/chat/completions", {})
    finally:
        server.close()
    assert answer == {"status": 200, "content": "", "msg": "the body was cut short after 11 bytes (89 more expected)"}
    judged = verdict({"health": HEALTH, "models": MODELS, "chat": answer}, "h", URL, "GLM-5.3-Flash")
    assert [p["code"] for p in judged["problems"]] == ["E_SMOKE"]
    assert "HTTP 200, the body was cut short after 11 bytes" in judged["problems"][0]["message"]


def test_box_fetch_without_an_answer_is_status_minus_one_with_the_reason():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    answer = box_fetch(5)("GET", "http://127.0.0.1:%d/health" % port)
    assert answer["status"] == -1 and "Connection refused" in answer["msg"]
    # A listener that never answers: the timeout runs out, and the verdict calls the engine wedged.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        answer = box_fetch(1)("POST", "http://127.0.0.1:%d/v1/chat/completions" % silent.getsockname()[1], {})
    finally:
        silent.close()
    assert answer["status"] == -1 and "timed out" in answer["msg"], answer
    judged = verdict({"health": HEALTH, "models": MODELS, "chat": answer}, "h", URL, "GLM-5.3-Flash")
    assert [p["code"] for p in judged["problems"]] == ["E_WEDGED"]


def test_a_200_that_is_not_ok_is_still_loading_and_asked_again():
    # An engine still loading may answer 200 with another status: the API requests wait for "ok".
    slept = []
    loading = {"status": 200, "content": '{"status":"loading"}'}
    engine = Engine(health=[loading, loading, HEALTH])
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", health_tries=5, health_delay=2, sleep=slept.append)
    assert [sent[1] for sent in engine.sent][:4] == ["/health", "/health", "/health", "/v1/models"]
    assert slept == [2, 2] and answers["health"] == HEALTH and "chat" in answers


def test_a_200_that_never_says_ok_sends_nothing_else_and_is_e_api():
    engine = Engine(health=[{"status": 200, "content": '{"status":"error"}'}])
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", health_tries=2, health_delay=1, sleep=lambda s: None)
    assert sorted(answers) == ["health"]
    judged = verdict(answers, "h", URL, "GLM-5.3-Flash")
    assert [p["code"] for p in judged["problems"]] == ["E_API"] and '"error"' in judged["problems"][0]["message"]


def test_health_ok_wants_200_and_status_ok_in_the_body():
    assert health_ok(200, '{"status":"ok"}') and health_ok(200, b'{"status": "ok", "warming": false}')
    assert health_ok(200, {"status": "ok"})
    assert not health_ok(200, '{"status":"loading"}') and not health_ok(200, b"") and not health_ok(200, "ok")
    assert not health_ok(503, '{"status":"ok"}') and not health_ok(None, "refused")


WARMING = {"status": 200, "content": '{"status":"ok","warming":true,"live":{"connections":0}}'}
WARM = {"status": 200, "content": '{"status":"ok","warming":false,"live":{"connections":0}}'}


def test_health_that_says_warming_is_asked_again_before_the_first_request():
    # The contract's /health says ok while the engine still warms up: the requests wait for the warm-up.
    slept = []
    engine = Engine(health=[WARMING, WARMING, WARM])
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", health_tries=5, health_delay=2, sleep=slept.append)
    assert [sent[1] for sent in engine.sent][:4] == ["/health", "/health", "/health", "/v1/models"]
    assert slept == [2, 2] and answers["health"] == WARM
    assert verdict(answers, "h", URL, "GLM-5.3-Flash")["status"] == "live"


def test_health_still_warming_after_every_try_sends_the_requests_all_the_same():
    # It serves while it warms up: the requests are judged, and a timed-out chat names the warm-up.
    engine = Engine(health=[WARMING])
    answers = send_requests(engine, URL, "GLM-5.3-Flash", "hi", health_tries=3, health_delay=1, sleep=lambda s: None)
    assert [sent[1] for sent in engine.sent][:4] == ["/health"] * 3 + ["/v1/models"] and "chat" in answers
    assert verdict(answers, "h", URL, "GLM-5.3-Flash")["status"] == "live"


def test_health_ready_wants_ok_and_no_warming_true():
    from ansible_collections.glm53.tensorfold.plugins.module_utils.health import health_ready, warming
    assert health_ready(200, '{"status":"ok"}') and health_ready(200, b'{"status":"ok","warming":false}')
    assert not health_ready(200, '{"status":"ok","warming":true}') and warming({"status": "ok", "warming": True})
    assert not health_ready(200, '{"status":"loading","warming":false}') and not health_ready(503, '{"status":"ok"}')
    assert not warming("not json") and not warming('{"status":"ok"}')
