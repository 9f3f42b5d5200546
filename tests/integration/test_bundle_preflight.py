# -*- coding: utf-8 -*-
"""site.yml's bundle pre-flight (roles/bundle/tasks/preflight_bundle.yml) on this controller, with
the host's facts set by the play: it refuses, before anything changes, a host the bundle cannot
serve (not apt, a Python or CPU the Hub client was not built for), and points weights_fetch's
client cache at the controller's cache, never inside the bundle."""

import json
import os
import sys

import pytest

from ansible_run import ROOT, run_playbook

sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle  # noqa: E402

REVISION = "a" * 40
ITEMS = {
    "image": ("image.tar", {"ref": "glm53/tensorfold:x", "id": "sha256:1"}),
    "image-series": ("0001.patch", {}),
    "toolkit": ("deb/Packages", {"version": "1.18.2-1"}),
    "python/hf-client": ("huggingface_hub-1.0-cp311-x86_64.tar.gz", {"targets": ["cp311-x86_64"]}),
    "weights/model": ("files/model.safetensors", {"repo_id": "org/model", "revision": REVISION}),
}
PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        ansible_facts: "{{ host_facts }}"
    - ansible.builtin.include_role:
        name: glm53.tensorfold.bundle
        tasks_from: preflight_bundle
        rolespec_validate: false
    - ansible.builtin.debug:
        msg: "client cache: {{ weights_fetch_client_cache }}"
"""


@pytest.fixture()
def site(tmp_path):
    root = str(tmp_path / "bundle")
    hasher = bundle.Hasher(root)
    records = []
    for name, (rel, meta) in ITEMS.items():
        path = os.path.join(root, name, rel)
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as handle:
            handle.write(name)
        records.append(bundle.describe_item(root, name, "test", meta, hasher))
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        version = [ln.split(":", 1)[1].strip() for ln in handle if ln.startswith("version:")][0]
    with open(os.path.join(root, bundle.MANIFEST), "w") as handle:
        json.dump(bundle.assemble_manifest(records, {"collection_version": version}), handle)
    (tmp_path / "play.yml").write_text(PLAY)
    return tmp_path, root


def preflight(site, **facts):
    tmp_path, root = site
    host_facts = dict({"os_family": "Debian", "distribution": "Debian", "architecture": "x86_64",
                       "python": {"version": {"major": 3, "minor": 11}}}, **facts)
    inventory = {"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "host_facts": host_facts, "tensorfold_bundle": root, "tensorfold_data_dir": str(tmp_path / "data"),
        "tensorfold_drafter": "none", "tensorfold_model_repo": "org/model", "tensorfold_model_revision": REVISION,
        "nvidia_toolkit_version": "1.18.2-1"}}}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    rc, out = run_playbook(tmp_path / "play.yml", tmp_path / "inventory.json", tmp_path,
                           env={"HOME": str(tmp_path / "home")})
    return rc, " ".join(out.split())


def test_a_host_the_bundle_serves_takes_the_hub_client_from_the_controllers_cache(site):
    rc, out = preflight(site)
    assert rc == 0, out[-2000:]
    cache = os.path.join(str(site[0]), "home", ".cache", "glm53-tensorfold", "bundle-hf-client")
    assert "client cache: %s" % cache in out
    assert os.listdir(cache) == ["huggingface_hub-1.0-cp311-x86_64.tar.gz"]


def test_a_host_whose_python_the_hub_client_was_not_built_for_is_refused(site):
    rc, out = preflight(site, python={"version": {"major": 3, "minor": 12}})
    assert rc != 0
    assert ("[E_BUNDLE] localhost: the bundle carries the Hub client for cp311-x86_64, this host has cp312-x86_64. "
            "Rebuild with bundle_hf_client_targets including cp312-x86_64.") in out, out[-2000:]


def test_a_host_that_does_not_install_with_apt_is_refused(site):
    rc, out = preflight(site, os_family="RedHat", distribution="Rocky")
    assert rc != 0
    assert "[E_BUNDLE] localhost: the bundle carries the toolkit as an apt repository (Debian, Ubuntu), this host is Rocky (RedHat)" in out, out[-2000:]
