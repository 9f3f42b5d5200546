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
    assert merged == {"x": {"type": "int"}, "y": {"type": "str"}, "z": {"type": "str"}}


def test_the_options_of_every_entry_point_are_checked_and_a_name_has_one_spec():
    # The bundle's entry points (build, build_image, preflight, deploy...) have no main.
    assert {"bundle_tarball", "bundle_toolkit_arches", "bundle_host_dir", "bundle_image_host"} <= set(SPEC)
    problems = settings_spec.settings_problems(SPEC, {"bundle_tarball": "maybe", "bundle_toolkit_arches": "amd64"}, "h")
    assert sorted(p["setting"] for p in problems) == ["bundle_tarball", "bundle_toolkit_arches"]
    with pytest.raises(ValueError, match="x is specified differently in a/main and b/drain"):
        settings_spec.merge_specs({"a": {"argument_specs": {"main": {"options": {"x": {"type": "int"}}}}},
                                   "b": {"argument_specs": {"drain": {"options": {"x": {"type": "str"}}}}}})


def test_only_the_main_and_settings_entry_points_count_in_the_fingerprint():
    excluded = settings_spec.fingerprint_excluded({"a": {"argument_specs": {
        "main": {"options": {"x": {"type": "int"}}}, "drain": {"options": {"x": {"type": "int"}, "y": {"type": "str"}}}}}})
    assert excluded == frozenset(["y"])


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


# Raw values: the roles get the value as written, not the copy Ansible's check converts.

@pytest.mark.parametrize("value", ["0,1", "[0,1]", "[0, 1]"])
def test_gpus_given_as_text_get_one_message_with_the_command_line_form(value):
    problems = settings_spec.settings_problems(SPEC, {"tensorfold_gpus": value}, "h")
    assert len(problems) == 1, problems
    assert problems[0]["setting"] == "tensorfold_gpus"
    assert "not a list" in problems[0]["message"]
    assert """-e '{"tensorfold_gpus": [0, 1]}'""" in problems[0]["message"]


@pytest.mark.parametrize("name,value", [
    ("tensorfold_thinking", "y"),  # true for the check, false for the bool filter and the engine
    ("tensorfold_kv_pages", "t"),
    ("tensorfold_vision", "n"),
    ("tensorfold_ablit", " yes"),  # the bool filter does not strip
    ("tensorfold_w8a8", 1.0),  # "1.0" for the engine
    ("tensorfold_port", "8020.0"),
    ("tensorfold_port", " 8020"),
    ("tensorfold_port", 8020.0),
    ("tensorfold_nccl_port", "1_000"),
    ("tensorfold_memory_reserve_gib", True),
    ("tensorfold_memory_reserve_gib", "1e1"),
    ("tensorfold_memory_reserve_gib", " 4"),
    ("gpu_host_checks_gpu_indices", "0,1"),
    ("gpu_host_checks_tools", "docker,nvidia-smi"),
    ("tensorfold_engine_names", '{"dense": "--dense"}'),  # the check parses JSON text, engine_args does not
    ("tensorfold_engine_names", "dense=--dense"),
    ("tensorfold_data_dir", "~/glm"),  # the check's path type expands ~ and $VARS on the controller
    ("tensorfold_data_dir", "$HOME/glm"),
])
def test_a_raw_form_the_roles_read_otherwise_is_one_problem(name, value):
    problems = settings_spec.settings_problems(SPEC, {name: value}, "h")
    assert [p["setting"] for p in problems] == [name], problems
    assert problems[0]["message"].startswith("[E_SETTINGS] h: %s " % name)


@pytest.mark.parametrize("value", ["yes", "Off", "TRUE", "0", 1, False])
def test_the_boolean_forms_every_reader_takes_alike_pass_and_others_do_not(value):
    # That the roles' bool filter reads them alike too is tests/unit/plugins/action/test_settings_names.py's.
    from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_args import _flag
    assert settings_spec.settings_problems(SPEC, {"tensorfold_thinking": value}, "h") == []
    assert _flag(value) == (str(value).lower() in ("yes", "true", "1"))
    assert [p["setting"] for p in settings_spec.settings_problems(SPEC, {"tensorfold_thinking": "t"}, "h")] == ["tensorfold_thinking"]


def test_a_short_secret_does_not_mask_other_messages():
    problems = settings_spec.settings_problems(SPEC, {"tensorfold_hf_token": "1", "tensorfold_kv": "int1"}, "h")
    assert [p["setting"] for p in problems] == ["tensorfold_kv"]
    assert "got: int1" in problems[0]["message"] and "********" not in problems[0]["message"]
    # Nor a secret inside a longer word ("value of tensorfold_kv must be one of").
    problems = settings_spec.settings_problems(SPEC, {"tensorfold_hf_token": "valu", "tensorfold_kv": "int4"}, "h")
    assert problems[0]["message"].startswith("[E_SETTINGS] h: value of tensorfold_kv")


@pytest.mark.parametrize("values", [
    {"tensorfold_api_key": "sk-canary,x", "tensorfold_port": "sk-canary,x"},  # a raw-form message
    {"tensorfold_hf_token": "hf_canary1", "tensorfold_model_repo": "hf_canary1"},  # a range message
    {"tensorfold_hf_token": "can4", "tensorfold_served_name": " can4"},  # short: masked as a word
])
def test_a_secret_is_masked_in_every_other_message(values):
    problems = settings_spec.settings_problems(SPEC, values, "h")
    assert problems and not any("can" in p["message"] for p in problems), problems


def test_a_setting_whose_template_failed_is_named():
    entry = settings_spec.unresolved_setting("tensorfold_port", Exception("'undefined' is undefined"), "h")
    assert entry["code"] == "E_SETTINGS" and entry["setting"] == "tensorfold_port"
    assert entry["message"].startswith("[E_SETTINGS] h: tensorfold_port could not be templated ('undefined' is undefined).")
    # An undefined ansible_* name is refused too: no play gathers facts before the settings are used.
    for name in ("ansible_default_ipv4", "ansible_api_port"):
        entry = settings_spec.unresolved_setting("tensorfold_host", Exception("'%s' is undefined" % name), "h")
        assert entry["code"] == "E_SETTINGS" and entry["setting"] == "tensorfold_host"
        assert "('%s' is undefined)" % name in entry["message"] and "give the value itself" in entry["message"]
    entry = settings_spec.unresolved_setting("tensorfold_api_key", Exception("'ansible_vault_key' is undefined"), "h", secret=True)
    assert "ansible_vault_key is undefined" in entry["message"]
    # A secret's template is never shown, only what was undefined.
    entry = settings_spec.unresolved_setting("tensorfold_api_key", Exception("bad sk-canary{{ x"), "h", secret=True)
    assert "canary" not in entry["message"]
    problems = settings_spec.settings_problems(SPEC, {}, "h", [entry])
    assert [p["setting"] for p in problems] == ["tensorfold_api_key"]


def _yaml_values(pattern):
    found = []
    for path in sorted(glob.glob(os.path.join(ROLES, "..", pattern))):
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        # A template needs the run's variables; its result is checked in the run.
        found.append((os.path.relpath(path, os.path.join(ROLES, "..")),
                      dict((k, v) for k, v in data.items() if not (isinstance(v, str) and "{{" in v))))
    return found


@pytest.mark.parametrize("path,values", _yaml_values("roles/*/defaults/main.yml") + _yaml_values("inventories/*/group_vars/*.yml")
                         + _yaml_values("inventories/*/host_vars/*.yml"))
def test_the_defaults_and_example_inventories_pass_the_stricter_checks(path, values):
    assert settings_spec.settings_problems(SPEC, values, path) == []


def test_null_is_a_value_only_of_an_int_whose_spec_defaults_to_null():
    # rank_container_lock_wait: null means "as long as a start may hold the lock"; a port has no such meaning.
    assert settings_spec.settings_problems(SPEC, {"rank_container_lock_wait": None}, "h") == []
    assert [p["setting"] for p in settings_spec.settings_problems(SPEC, {"rank_container_lock_wait": "soon"}, "h")] \
        == ["rank_container_lock_wait"]
    assert [p["setting"] for p in settings_spec.settings_problems(SPEC, {"tensorfold_port": None}, "h")] == ["tensorfold_port"]


def test_a_value_shared_by_hosts_is_validated_once_and_each_host_named(monkeypatch):
    made = []
    real = settings_spec.ArgumentSpecValidator

    def counting(spec):
        made.append(sorted(spec))
        return real(spec)

    monkeypatch.setattr(settings_spec, "ArgumentSpecValidator", counting)
    memo = {}
    shared = {"tensorfold_kv": "int4", "tensorfold_thinking": "yes", "tensorfold_gpus": [0, 1]}
    hosts = (("gpu-a", 8020), ("gpu-b", 8021), ("gpu-c", 8021))
    answers = [settings_spec.settings_problems(SPEC, dict(shared, tensorfold_port=port), host, memo=memo)
               for host, port in hosts]
    assert made == [sorted(list(shared) + ["tensorfold_port"]), ["tensorfold_port"]]
    for (host, port), problems in zip(hosts, answers):
        assert [p["setting"] for p in problems] == ["tensorfold_kv"]
        assert problems[0]["message"].startswith("[E_SETTINGS] %s: value of tensorfold_kv must be one of: " % host)
        assert problems == settings_spec.settings_problems(SPEC, dict(shared, tensorfold_port=port), host)


@pytest.mark.parametrize("first,second", [
    ({"tensorfold_kv": "int4"}, {"tensorfold_kv": "fp8"}),
    ({"tensorfold_kv": "fp8"}, {"tensorfold_kv": "int4"}),
    ({"tensorfold_reasoning_effort": "extreme"}, {"tensorfold_reasoning_effort": "high"}),
    ({"tensorfold_thinking": "yes"}, {"tensorfold_thinking": False}),
    ({"tensorfold_gpus": [0, 1]}, {"tensorfold_gpus": [0]}),
])
def test_hosts_whose_settings_differ_get_their_own_verdicts_from_one_memo(first, second):
    memo = {}
    for values in (first, second, first):
        assert settings_spec.settings_problems(SPEC, values, "h", memo=memo) == settings_spec.settings_problems(SPEC, values, "h")
    assert len(memo) == 2  # both values reached the validator, each kept apart


def test_a_secret_shared_by_hosts_is_masked_on_each():
    spec = {"tensorfold_secret_port": {"type": "int", "no_log": True}}
    memo = {}
    for host in ("a", "b"):
        problems = settings_spec.settings_problems(spec, {"tensorfold_secret_port": "hf_secretCanary1234"}, host, memo=memo)
        assert [p["setting"] for p in problems] == ["tensorfold_secret_port"]
        assert not any("secretCanary" in p["message"] for p in problems)
        assert problems[0]["message"].startswith("[E_SETTINGS] %s: " % host)


@pytest.mark.parametrize("names, text", [
    ({"KV_PAGE": "--kv-pages"}, "tensorfold_engine_names has KV_PAGE, which is not a knob; the supported knobs: "),
    ({"KV_PAGE": "--kv-pages", "Dense": "X"}, "tensorfold_engine_names has Dense and KV_PAGE, which are not knobs;"),
])
def test_an_unknown_engine_names_key_is_named_as_no_knob_with_the_supported_ones(names, text):
    problems = settings_spec.settings_problems(SPEC, {"tensorfold_engine_names": names}, "h")
    assert [p["setting"] for p in problems] == ["tensorfold_engine_names"]
    assert text in problems[0]["message"]
    assert "absorb_mma, dense, head, kv_pages, w8a8" in problems[0]["message"]


def test_the_step_guards_options_are_no_settings():
    # The playbooks pass them to the guard; their defaults template on step_roles, undefined elsewhere.
    assert not [name for name in SPEC if name.startswith("step_")]
