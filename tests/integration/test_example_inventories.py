"""The example inventories: every shared setting documented with its default, and both parse."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT, run_playbook  # noqa: E402

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


def test_airgapped_inventory_builds_its_bundle_from_upstream_with_the_sites_image_inputs():
    data = inventory(os.path.join(ROOT, "inventories", "example-airgapped", "hosts"))
    host = data["_meta"]["hostvars"]["gpu-box-01"]
    shared = defaults()
    assert host["tensorfold_bundle"]
    # the build's sources are upstream, never the site's mirrors (which the build machine cannot reach)
    assert host["bundle_hf_endpoint"] == shared["tensorfold_hf_endpoint"]
    assert host["bundle_toolkit_apt_repo_url"] == shared["nvidia_toolkit_apt_repo_url"]
    assert host["bundle_toolkit_gpg_key_url"] == shared["nvidia_toolkit_gpg_key_url"]
    # the image tag's inputs are one setting for both sides, not a site mirror
    assert not [name for name, value in host.items() if name.startswith(("tensorfold_image_", "tensorfold_hf_endpoint"))
                or "internal.example" in str(value)]
    assert host["tensorfold_api_key"] == "{{ vault_tensorfold_api_key }}"


@pytest.mark.parametrize("folder", ["example", "example-airgapped"])
def test_the_example_inventories_pass_the_settings_check(tmp_path, folder):
    # What site.yml's pre-flight checks of every host (gateway and monitoring hosts too), with the
    # vault's variables given as the operator's vault would. Each host's check fails on its problems.
    play = tmp_path / "check.yml"
    play.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - glm53.tensorfold.settings_check: {}\n")
    hosts_file = os.path.join(ROOT, "inventories", folder, "hosts")
    rc, output = run_playbook(play, hosts_file, tmp_path,
                              ["-e", "vault_tensorfold_api_key=sk-example", "-e", "vault_tensorfold_hf_token=hf_example"])
    assert rc == 0, output
    assert "E_SETTINGS" not in output and "W_SETTINGS" not in output, output
    for host in inventory(hosts_file)["_meta"]["hostvars"]:
        assert re.search(r"^%s +: ok=1 .* failed=0 " % re.escape(host), output, re.M), output
