"""The example inventories: every shared setting documented with its default, and both parse."""

import json
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT  # noqa: E402

INVENTORY_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-inventory")


def defaults():
    with open(os.path.join(ROOT, "roles", "tensorfold", "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


def test_every_shared_setting_is_documented_with_its_default():
    with open(os.path.join(ROOT, "inventories", "example", "group_vars", "all.yml")) as handle:
        text = handle.read()
    documented = dict(re.findall(r"^# ([a-z][a-z0-9_]+): (.*)$", text, re.M))
    for name, value in defaults().items():
        assert name in documented, name
        if name in ("tensorfold_hf_token", "tensorfold_api_key"):
            assert "vault_" in documented[name]  # a vault reference, never a value
            continue
        assert yaml.safe_load(documented[name]) == value, name


def inventory(path):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    out = subprocess.run([INVENTORY_BIN, "-i", path, "--list"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, check=True).stdout
    return json.loads(out)


def test_example_inventory_puts_rank_zero_off_the_display_gpu():
    data = inventory(os.path.join(ROOT, "inventories", "example", "hosts"))
    assert sorted(data["gpu_hosts"]["hosts"]) == ["gpu-box-01", "gpu-box-02", "gpu-box-03"]
    assert data["_meta"]["hostvars"]["gpu-box-02"]["tensorfold_gpus"] == [1, 0]
    assert "tensorfold_gpus" not in data["_meta"]["hostvars"]["gpu-box-01"]


def test_airgapped_inventory_points_every_download_at_a_mirror():
    data = inventory(os.path.join(ROOT, "inventories", "example-airgapped", "hosts"))
    host = data["_meta"]["hostvars"]["gpu-box-01"]
    assert host["tensorfold_hf_endpoint"] != defaults()["tensorfold_hf_endpoint"]
    assert host["tensorfold_image_build_strategy"] == "registry" and host["tensorfold_image_registry"]
    for name in ("nvidia_toolkit_apt_repo_url", "nvidia_toolkit_gpg_key_url", "tensorfold_image_zig_url",
                 "tensorfold_image_engine_repo"):
        assert "internal.example" in host[name], name
    assert host["tensorfold_api_key"] == "{{ vault_tensorfold_api_key }}"
