# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils.settings import check_settings

GOOD = {
    "tensorfold_model_source": "download",
    "tensorfold_model_revision": "078455ffe6472f9a52fbc1139f58b9db2881b25c",
    "tensorfold_ablit": False,
    "tensorfold_hf_token": "",
    "tensorfold_gpus": [0, 1],
    "tensorfold_parallel": 4,
    "tensorfold_context": "auto",
    "tensorfold_memory_reserve_gib": 3.5,
    "tensorfold_max_tokens": 32768,
    "tensorfold_port": 8020,
    "tensorfold_nccl_port": 29583,
    "tensorfold_wait_timeout": 2400,
    "tensorfold_data_dir": "/srv/glm53",
    "tensorfold_container_name": "glm53-zig",
    "tensorfold_api_key": "",
}


def _with(**changes):
    settings = dict(GOOD)
    settings.update(changes)
    return settings


def _settings_named(problems):
    return sorted(p["setting"] for p in problems)


def test_recipe_defaults_have_no_problems():
    assert check_settings(GOOD, "gpu1") == []


@pytest.mark.parametrize("name,value", [
    ("tensorfold_parallel", 0),
    ("tensorfold_parallel", 9),
    ("tensorfold_parallel", "many"),
    ("tensorfold_context", 2000000),
    ("tensorfold_context", 100),
    ("tensorfold_context", "max"),
    ("tensorfold_gpus", [0]),
    ("tensorfold_gpus", [1, 1]),
    ("tensorfold_gpus", [0, 1, 2]),
    ("tensorfold_memory_reserve_gib", -1),
    ("tensorfold_model_revision", "main"),
    ("tensorfold_port", 70000),
    ("tensorfold_port", 29584),
    ("tensorfold_wait_timeout", 5),
    ("tensorfold_data_dir", "srv/glm53"),
    ("tensorfold_container_name", "bad name"),
])
def test_each_bad_setting_is_named_with_host_and_code(name, value):
    problems = check_settings(_with(**{name: value}), "gpu7")
    assert len(problems) == 1, problems
    problem = problems[0]
    assert problem["code"] == "E_SETTINGS"
    assert problem["severity"] == "error"
    assert problem["setting"] == name
    assert problem["message"].startswith("[E_SETTINGS] gpu7: %s " % name)


@pytest.mark.parametrize("name,value", [
    ("tensorfold_parallel", "auto"),
    ("tensorfold_parallel", "8"),
    ("tensorfold_context", 1048576),
    ("tensorfold_context", "262144"),
    ("tensorfold_gpus", [1, 0]),
    ("tensorfold_memory_reserve_gib", 0),
])
def test_edge_values_are_accepted(name, value):
    assert check_settings(_with(**{name: value}), "h") == []


def test_all_problems_are_reported_at_once():
    problems = check_settings(_with(tensorfold_parallel=0, tensorfold_context=2000000, tensorfold_gpus=[0]), "h")
    assert _settings_named(problems) == ["tensorfold_context", "tensorfold_gpus", "tensorfold_parallel"]


def test_ablit_without_a_token_is_not_a_settings_problem():
    # Verified Ablit weights in place serve without a token; weights_fetch asks for it only when
    # gated files must be downloaded.
    assert check_settings(_with(tensorfold_ablit=True), "h") == []


def test_local_source_needs_an_absolute_model_dir():
    assert _settings_named(check_settings(_with(tensorfold_model_source="local"), "h")) == ["tensorfold_model_dir"]
    assert _settings_named(check_settings(_with(tensorfold_model_source="local", tensorfold_model_dir="models/x"), "h")) == ["tensorfold_model_dir"]
    assert check_settings(_with(tensorfold_model_source="local", tensorfold_model_dir="/data/ckpt"), "h") == []


def test_api_key_problem_never_echoes_the_key():
    canary = "canary secret,value"
    problems = check_settings(_with(tensorfold_api_key=canary), "h")
    assert _settings_named(problems) == ["tensorfold_api_key"]
    assert canary not in problems[0]["message"]
    assert "canary" not in problems[0]["message"]


def test_boolean_is_not_a_stream_count():
    assert _settings_named(check_settings(_with(tensorfold_parallel=True), "h")) == ["tensorfold_parallel"]
