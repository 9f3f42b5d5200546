# -*- coding: utf-8 -*-
"""The settings check on the controller's side: the boolean forms it takes read alike in the roles'
bool filter, and W_SETTINGS for a tensorfold_* name that is no setting (the names the collection
itself defines and sets never warn). Here and not under module_utils: these need ansible.plugins."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml

from ansible.plugins.filter.core import to_bool

from ansible_collections.glm53.tensorfold.plugins.action.settings_check import COLLECTION, _role_specs
from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec
from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_args import _flag

ROLES = os.path.join(COLLECTION, "roles")


# The specs as the check itself reads them.
SPEC = settings_spec.merge_specs(_role_specs())


@pytest.mark.parametrize("value", ["yes", "Off", "TRUE", "0", 1, False])
def test_the_boolean_forms_the_check_takes_read_alike_in_the_bool_filter_and_the_engine_args(value):
    assert settings_spec.settings_problems(SPEC, {"tensorfold_thinking": value}, "h") == []
    assert to_bool(value) == _flag(value)


def _own_variables():
    """The tensorfold_* variables a run of the collection defines, read structurally (what
    settings_spec.INTERNAL_NAMES must cover): role defaults and vars, set_fact keys, registered results, task and
    play vars, and the facts the plugins set."""
    names = set(SPEC)
    collection = os.path.join(ROLES, "..")

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("set_fact", "ansible.builtin.set_fact", "vars") and isinstance(value, dict):
                    names.update(value)
                if key == "register" and isinstance(value, str):
                    names.add(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for pattern in ("roles/*/defaults/main.yml", "roles/*/vars/main.yml"):
        for path in glob.glob(os.path.join(collection, pattern)):
            with open(path) as handle:
                names.update(yaml.safe_load(handle) or {})
    for pattern in ("roles/*/tasks/*.yml", "playbooks/*.yml", "roles/*/handlers/*.yml"):
        for path in glob.glob(os.path.join(collection, pattern)):
            with open(path) as handle:
                walk(yaml.safe_load(handle))
    return sorted(name for name in names if name.startswith("tensorfold_"))


def test_every_variable_the_collection_defines_is_a_setting_or_listed_as_internal():
    own = _own_variables()
    assert len(own) > len([n for n in SPEC if n.startswith("tensorfold_")])  # facts and registers were found
    assert sorted(set(own) - set(SPEC) - settings_spec.INTERNAL_NAMES) == []
    # Those the run defines when the settings are checked never warn.
    assert settings_spec.unknown_settings(settings_spec.CHECK_TIME_NAMES, SPEC, "gpu-a") == []


@pytest.mark.parametrize("name,closest", [
    ("tensorfold_contxt", "tensorfold_context"), ("tensorfold_gpu", "tensorfold_gpus"),
    ("tensorfold_paralel", "tensorfold_parallel"), ("tensorfold_apikey", "tensorfold_api_key"),
    ("tensorfold_model", "tensorfold_model_dir"),
])
def test_a_misspelled_setting_warns_with_the_closest_name(name, closest):
    found = settings_spec.unknown_settings([name, "inventory_hostname", "not_ours_port"], SPEC, "inventory")
    assert [(e["code"], e["severity"], e["setting"]) for e in found] == [("W_SETTINGS", "warning", name)]
    assert found[0]["message"].startswith("[W_SETTINGS] inventory: %s is not a setting" % name)
    assert "Did you mean %s?" % closest in found[0]["message"]


def test_a_variable_the_collection_sets_itself_warns_when_given():
    # A misspelling of tensorfold_image_build_strategy that is also a variable of the image role.
    found = settings_spec.unknown_settings(["tensorfold_image_strategy"], SPEC, "gpu-b")
    assert [e["setting"] for e in found] == ["tensorfold_image_strategy"]
    assert found[0]["message"].startswith("[W_SETTINGS] gpu-b: tensorfold_image_strategy is not a setting")
    assert "sets this variable itself" in found[0]["message"]
    assert "Did you mean tensorfold_image_build_strategy?" in found[0]["message"]
