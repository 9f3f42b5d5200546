# -*- coding: utf-8 -*-
"""The smoke verdict names a wedged engine: /health ok, the chat request times out."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke import timed_out, verdict

URL = "http://127.0.0.1:8020"
HEALTH = {"status": 200, "json": {"status": "ok"}}
MODELS = {"status": 200, "json": {"object": "list", "data": [{"id": "GLM-5.3-Flash", "object": "model"}]}}
# What smoke.box_fetch answers when the timeout runs out before any byte of the reply (Python's
# socket timeout says "timed out"), and when nothing listens.
TIMED_OUT = {"status": -1, "msg": "Request failed: The read operation timed out"}
REFUSED = {"status": -1, "msg": "Request failed: [Errno 111] Connection refused"}


def test_a_timed_out_completion_with_health_ok_is_wedged():
    result = verdict({"health": HEALTH, "models": MODELS, "chat": TIMED_OUT}, "gpu-box-02", URL, "GLM-5.3-Flash")
    assert result["status"] == "failed"
    [problem] = result["problems"]
    assert problem["code"] == "E_WEDGED"
    assert problem["message"].startswith("[E_WEDGED] gpu-box-02: %s/health answers ok" % URL)
    assert "timed out" in problem["message"]


def test_a_refused_completion_is_not_called_wedged():
    result = verdict({"health": HEALTH, "models": MODELS, "chat": REFUSED}, "gpu-box-02", URL, "GLM-5.3-Flash")
    assert [p["code"] for p in result["problems"]] == ["E_SMOKE"]


def test_timed_out_needs_no_http_answer():
    assert timed_out(TIMED_OUT)
    assert not timed_out({"status": 504, "msg": "timed out"})
    assert not timed_out(None)


def test_a_wedge_while_health_says_warming_names_the_warm_up():
    warming = {"status": 200, "json": {"status": "ok", "warming": True}}
    [problem] = verdict({"health": warming, "models": MODELS, "chat": TIMED_OUT}, "gpu-box-02", URL,
                        "GLM-5.3-Flash")["problems"]
    assert problem["code"] == "E_WEDGED" and "still warming up: raise smoke_test_timeout" in problem["message"]
    [problem] = verdict({"health": HEALTH, "models": MODELS, "chat": TIMED_OUT}, "gpu-box-02", URL,
                        "GLM-5.3-Flash")["problems"]
    assert "warming" not in problem["message"]


def test_a_wedge_with_api_keys_says_health_cannot_tell_a_warm_up():
    # With keys the contract's /health is only {"status":"ok"}: the verdict cannot tell a warm-up
    # (Docker's own restart of the container, which no start waited for) from a wedge, and says so.
    answers = {"health": HEALTH, "models": MODELS, "chat": TIMED_OUT,
               "without_key": {"status": 401}, "with_key": {"status": 200}}
    [problem] = verdict(answers, "gpu-box-02", URL, "GLM-5.3-Flash", api_key_set=True)["problems"]
    assert problem["code"] == "E_WEDGED"
    assert "with API keys /health answers only its status and cannot say whether the engine still warms up" \
        in problem["message"] and "raise smoke_test_timeout" in problem["message"]
    keyless = dict(answers, health={"status": 200, "json": {"status": "ok", "warming": False}})
    [problem] = verdict(keyless, "gpu-box-02", URL, "GLM-5.3-Flash", api_key_set=True)["problems"]
    assert "warm" not in problem["message"]
