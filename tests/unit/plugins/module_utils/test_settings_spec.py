# -*- coding: utf-8 -*-
"""Every role's argument_specs checked the recipe's way: one [E_SETTINGS] per bad value, at once."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml

from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec

ROLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles")


def _specs():
    specs = {}
    for path in glob.glob(os.path.join(ROLES, "*", "meta", "argument_specs.yml")):
        with open(path) as handle:
            specs[os.path.basename(os.path.dirname(os.path.dirname(path)))] = yaml.safe_load(handle)
    return settings_spec.merge_specs(specs)


SPEC = _specs()
CHOICES = sorted((name, option["choices"]) for name, option in SPEC.items() if option.get("choices"))


def test_the_specs_of_every_role_are_read():
    assert {"tensorfold_kv", "tensorfold_reasoning_effort", "weights_fetch_strategy"} <= set(SPEC)
    assert len(CHOICES) >= 8


@pytest.mark.parametrize("name,choices", CHOICES)
def test_every_choices_setting_outside_its_choices_is_an_e_settings_problem(name, choices):
    problems = settings_spec.settings_problems(SPEC, {name: "extreme-not-a-choice"}, "gpu-a")
    assert [p["code"] for p in problems] == ["E_SETTINGS"]
    assert problems[0]["setting"] == name
    assert problems[0]["message"].startswith("[E_SETTINGS] gpu-a: value of %s must be one of: " % name)
    assert "got: extreme-not-a-choice" in problems[0]["message"]
    for choice in choices:
        problems = settings_spec.settings_problems(SPEC, {name: choice}, "gpu-a")
        assert [p for p in problems if p["setting"] == name] == [], choice


def test_every_bad_value_is_reported_in_one_pass_once():
    problems = settings_spec.settings_problems(SPEC, {
        "tensorfold_kv": "int4", "tensorfold_reasoning_effort": "extreme", "tensorfold_port": "abc",
        "tensorfold_parallel": 0, "tensorfold_gpus": [0], "tensorfold_context": "auto"}, "gpu-b")
    assert sorted(p["setting"] for p in problems) == [
        "tensorfold_gpus", "tensorfold_kv", "tensorfold_parallel", "tensorfold_port", "tensorfold_reasoning_effort"]
    assert all(p["message"].startswith("[E_SETTINGS] gpu-b: ") for p in problems)


def test_converted_values_reach_the_range_checks():
    assert settings_spec.settings_problems(SPEC, {"tensorfold_port": "8020", "tensorfold_nccl_port": 29583}, "h") == []
    problems = settings_spec.settings_problems(SPEC, {"tensorfold_port": "29583", "tensorfold_nccl_port": 29583}, "h")
    assert [p["setting"] for p in problems] == ["tensorfold_port"]


def test_a_secret_never_shows_in_a_message():
    spec = {"tensorfold_secret_port": {"type": "int", "no_log": True}}
    problems = settings_spec.settings_problems(spec, {"tensorfold_secret_port": "hf_secretCanary1234"}, "h")
    assert [p["setting"] for p in problems] == ["tensorfold_secret_port"]
    assert not any("secretCanary" in p["message"] for p in problems)


def test_unknown_names_are_left_alone():
    assert settings_spec.settings_problems(SPEC, {"not_ours": "x"}, "h") == []


def test_the_shared_settings_are_read_from_the_tensorfold_roles_settings_entry_point():
    # roles/tensorfold names its entry point `settings`, so that Ansible does not check it again in every play
    assert {"tensorfold_port", "tensorfold_parallel", "tensorfold_api_key"} <= set(SPEC)
    merged = settings_spec.merge_specs({"a": {"argument_specs": {"settings": {"options": {"x": {"type": "int"}}}}},
                                        "b": {"argument_specs": {"main": {"options": {"y": {"type": "str"}}},
                                                                 "other": {"options": {"z": {"type": "str"}}}}}})
    assert merged == {"x": {"type": "int"}, "y": {"type": "str"}}


@pytest.mark.parametrize("values, play_values, warned", [
    ({"tensorfold_serial": "100%", "tensorfold_restart_serial": 1}, {}, []),  # the defaults
    ({"tensorfold_serial": 10}, {"tensorfold_serial": 10}, []),  # -e: the plays take it
    ({"tensorfold_serial": 10}, {}, ["[W_SERIAL] inventory: tensorfold_serial is 10 there, but the plays take 100%"]),
    ({"tensorfold_serial": 10}, {"tensorfold_serial": "25%"}, ["tensorfold_serial is 10 there, but the plays take 25%"]),
    ({"tensorfold_restart_serial": 4}, {}, ["tensorfold_restart_serial is 4 there, but the plays take 1"]),
    ({"tensorfold_restart_serial": "1"}, {}, []),  # the same value, written as a string
])
def test_a_batch_size_the_plays_do_not_take_is_named(values, play_values, warned):
    found = settings_spec.unused_play_keywords(values, play_values, {"tensorfold_serial": "100%", "tensorfold_restart_serial": 1})
    assert len(found) == len(warned)
    for entry, text in zip(found, warned):
        assert entry["code"] == "W_SERIAL" and entry["severity"] == "warning" and text in entry["message"]
