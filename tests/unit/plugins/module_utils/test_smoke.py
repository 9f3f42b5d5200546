# -*- coding: utf-8 -*-
"""The smoke verdict over replies shaped as the engine contract records them."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import chat_reply, verdict

URL = "http://127.0.0.1:8020"
HEALTH = {"status": 200, "json": {
    "status": "ok", "model": "GLM-5.3-Flash", "model_ids": ["GLM-5.3-Flash"], "max_batch_size": 4,
    "warming": False, "memory": {}, "live": {"connections": 0}}}
MODELS = {"status": 200, "json": {
    "object": "list", "data": [{"id": "GLM-5.3-Flash", "object": "model", "created": 1764400000, "owned_by": "tensorfold"}]}}
CHAT = {"status": 200, "json": {
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}]}}
UNAUTHORIZED = {"status": 401, "json": {"error": {
    "message": "A valid API key is required", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}}
REFUSED = {"status": -1, "msg": "Status code was -1 and not [200]: Request failed: <urlopen error [Errno 111] Connection refused>"}


def base():
    return {"health": HEALTH, "models": MODELS, "chat": CHAT}


def test_all_answers_as_the_contract_says_is_live():
    result = verdict(base(), "gpu-a", URL, "GLM-5.3-Flash")
    assert result["status"] == "live" and result["problems"] == []
    assert result["reply"] == "Hello."
    assert [c["name"] for c in result["checks"]] == ["health", "models", "chat"]


def test_no_answer_on_health_is_e_api_with_the_clients_error_and_nothing_else():
    results = base()
    results["health"] = REFUSED
    result = verdict(results, "gpu-a", URL, "GLM-5.3-Flash")
    assert result["status"] == "failed"
    assert [p["code"] for p in result["problems"]] == ["E_API"]
    assert "Connection refused" in result["problems"][0]["message"]
    assert result["problems"][0]["message"].startswith("[E_API] gpu-a: http://127.0.0.1:8020/health did not answer")


def test_models_without_the_served_name_is_e_smoke_naming_what_is_listed():
    result = verdict(base(), "h", URL, "GLM-5.3-Flash-Custom")
    assert [p["code"] for p in result["problems"]] == ["E_SMOKE"]
    assert "does not list GLM-5.3-Flash-Custom (it lists GLM-5.3-Flash)" in result["problems"][0]["message"]


def test_empty_reply_is_e_smoke_quoting_the_reply():
    results = base()
    results["chat"] = {"status": 200, "json": {"choices": [{"message": {"role": "assistant", "content": ""}}]}}
    result = verdict(results, "h", URL, "GLM-5.3-Flash")
    assert result["status"] == "failed"
    assert "HTTP 200" in result["problems"][0]["message"] and '"content": ""' in result["problems"][0]["message"]


def test_long_replies_are_cut_short_in_the_message():
    results = base()
    results["chat"] = {"status": 500, "content": "x" * 5000}
    message = verdict(results, "h", URL, "GLM-5.3-Flash")["problems"][0]["message"]
    assert "HTTP 500" in message and len(message) < 600


def test_vision_is_checked_only_when_on():
    results = base()
    results["vision"] = {"status": 400, "json": {"error": {"message": "image input is off"}}}
    assert verdict(results, "h", URL, "GLM-5.3-Flash", vision=False)["status"] == "live"
    result = verdict(results, "h", URL, "GLM-5.3-Flash", vision=True)
    assert result["status"] == "failed" and "image input is off" in result["problems"][0]["message"]
    results["vision"] = CHAT
    assert verdict(results, "h", URL, "GLM-5.3-Flash", vision=True)["status"] == "live"


def test_key_not_enforced_is_reported():
    results = base()
    results["without_key"] = CHAT
    results["with_key"] = CHAT
    result = verdict(results, "h", URL, "GLM-5.3-Flash", api_key_set=True)
    assert [p["check"] for p in result["problems"]] == ["without_key"]
    assert "not enforced" in result["problems"][0]["message"]


def test_key_enforced_and_accepted_is_live():
    results = base()
    results["without_key"] = UNAUTHORIZED
    results["with_key"] = MODELS
    assert verdict(results, "h", URL, "GLM-5.3-Flash", api_key_set=True)["status"] == "live"
    results["with_key"] = UNAUTHORIZED
    result = verdict(results, "h", URL, "GLM-5.3-Flash", api_key_set=True)
    assert [p["check"] for p in result["problems"]] == ["with_key"]
    assert "invalid_api_key" in result["problems"][0]["message"]


def test_chat_reply_reads_content_parts_and_raw_json_text():
    assert chat_reply({"status": 200, "content": '{"choices":[{"message":{"content":"Hi"}}]}'}) == "Hi"
    assert chat_reply({"json": {"choices": [{"message": {"content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}}]}}) == "AB"
    assert chat_reply({"json": {"error": {}}}) == ""
