# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""engine_smoke against an HTTP server on loopback that answers as the engine contract states
(/health, /v1/models, chat completions, 401 with its body without the key): one module run sends
every request, judges, saves models.json and smoke.json once, and never returns the key."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import threading

from ansible.module_utils.six.moves import BaseHTTPServer

from ansible_collections.glm53.tensorfold.plugins.modules import engine_smoke

KEY = "engine-smoke-canary-5512"
MODELS = {"object": "list", "data": [{"id": "GLM-5.3-Flash", "object": "model", "created": 1764400000, "owned_by": "tensorfold"}]}
UNAUTHORIZED = {"error": {"message": "A valid API key is required", "type": "invalid_request_error", "param": None,
                          "code": "invalid_api_key"}}


def serve(key=None, vision=True):
    seen = []

    class Handler(BaseHTTPServer.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorised(self):
            return not key or self.headers.get("Authorization") == "Bearer " + key

        def do_GET(self):
            seen.append(("GET", self.path, self.headers.get("User-Agent")))
            if self.path == "/health":
                return self.answer(200, {"status": "ok"})
            if not self.authorised():
                return self.answer(401, UNAUTHORIZED)
            return self.answer(200, MODELS) if self.path == "/v1/models" else self.answer(404, {"error": {"message": "unknown path"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(("POST", self.path, body))
            if not self.authorised():
                return self.answer(401, UNAUTHORIZED)
            content = body["messages"][0]["content"]
            if isinstance(content, list) and not vision:
                return self.answer(400, {"error": {"message": "image input is off"}})
            self.answer(200, {"object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}]})

    server = BaseHTTPServer.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def args(server, **extra):
    base = {"url": "http://127.0.0.1:%d/" % server.server_port, "endpoint": "http://box:8020/v1", "host": "box",
            "served_name": "GLM-5.3-Flash", "health_tries": 1, "health_delay": 0}
    base.update(extra)
    return base


def test_live_engine_one_run_saves_both_files_and_a_second_changes_nothing(run_module, tmp_path):
    server, seen = serve()
    try:
        result = run_module(engine_smoke, **args(server, vision=True, save_dir=str(tmp_path)))
        assert result["verdict"]["status"] == "live" and result["verdict"]["endpoint"] == "http://box:8020/v1"
        assert [c["name"] for c in result["verdict"]["checks"]] == ["health", "models", "chat", "vision"]
        assert result["changed"] is True and sorted(p.name for p in tmp_path.iterdir()) == ["models.json", "smoke.json"]
        assert json.loads((tmp_path / "models.json").read_text()) == MODELS
        assert all(request[2] == "glm53-smoke-test" for request in seen if request[0] == "GET")
        again = run_module(engine_smoke, **args(server, vision=True, save_dir=str(tmp_path)))
        assert again["changed"] is False and again["verdict"] == result["verdict"]
    finally:
        server.shutdown()


def test_the_key_is_enforced_checked_and_never_returned_or_saved(run_module, tmp_path):
    server, seen = serve(key=KEY)
    try:
        result = run_module(engine_smoke, **args(server, api_key=KEY, save_dir=str(tmp_path)))
        assert result["verdict"]["status"] == "live"
        assert [c["name"] for c in result["verdict"]["checks"]] == ["health", "models", "chat", "without_key", "with_key"]
        assert KEY not in json.dumps(result)
        assert all(KEY not in p.read_text() for p in tmp_path.iterdir())
        # The engine has a key and the inventory none: E_SMOKE quoting the engine's 401.
        result = run_module(engine_smoke, **args(server))
        assert result["verdict"]["status"] == "failed" and not result.get("failed")
        assert {p["code"] for p in result["verdict"]["problems"]} == {"E_SMOKE"}
        assert "invalid_api_key" in result["verdict"]["problems"][0]["message"]
    finally:
        server.shutdown()


def test_vision_off_at_the_engine_is_e_smoke_on_the_image_request_only(run_module):
    server = serve(vision=False)[0]
    try:
        result = run_module(engine_smoke, **args(server, vision=True))
        assert [p["check"] for p in result["verdict"]["problems"]] == ["vision"]
        assert "image input is off" in result["verdict"]["problems"][0]["message"]
        assert result["saved"] == [] and result["changed"] is False
    finally:
        server.shutdown()


def test_nothing_listening_is_e_api_and_nothing_saved_without_the_folder(run_module, tmp_path):
    server = serve()[0]
    port = server.server_port
    server.shutdown()
    server.server_close()
    result = run_module(engine_smoke, url="http://127.0.0.1:%d" % port, host="box", served_name="GLM-5.3-Flash",
                        health_tries=1, save_dir=str(tmp_path / "missing"))
    [problem] = result["verdict"]["problems"]
    assert problem["code"] == "E_API" and "Connection refused" in problem["message"]
    assert result["saved"] == [] and not (tmp_path / "missing").exists()


def test_check_mode_sends_nothing_and_lists_the_requests(run_module, tmp_path):
    server, seen = serve()
    try:
        result = run_module(engine_smoke, _ansible_check_mode=True, **args(server, api_key=KEY, save_dir=str(tmp_path)))
        assert seen == [] and list(tmp_path.iterdir()) == []
        assert result["verdict"]["status"] == "planned" and result["changed"] is False
        assert result["requests"][-2].endswith("without a key: expects 401") and KEY not in json.dumps(result)
    finally:
        server.shutdown()
