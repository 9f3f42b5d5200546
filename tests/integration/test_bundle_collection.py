# -*- coding: utf-8 -*-
"""bundle_collection with the real ansible-galaxy (not under ansible-test units, whose Python path
holds only Ansible's module_utils): a checkout's stray site inventory never reaches the tarball."""

import json
import os
import sys
import tarfile

import pytest

from ansible.module_utils.testing import patch_module_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.modules import bundle_collection  # noqa: E402


def run(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_the_collection_tarball_holds_no_stray_secret_of_the_checkout(tmp_path, capsys):
    src = tmp_path / "checkout"
    files = {
        "galaxy.yml": "namespace: glm53\nname: tensorfold\nversion: 0.1.0\nreadme: README.md\nauthors: [t]\n",
        "README.md": "readme\n", ".gitignore": "/.venv\n", "roles/r/tasks/main.yml": "---\n",
        "inventories/example/hosts": "[gpu_hosts]\n",
        "mysite/group_vars/all.yml": "tensorfold_hf_token: hf_site_secret\n",
        "inventories/mysite/group_vars/vault.yml": "vault_tensorfold_api_key: sk-site-secret\n",
    }
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    root = str(tmp_path / "bundle")
    packed = run(bundle_collection, {"root": root, "src": str(src), "version": "0.1.0"}, capsys)
    assert packed.get("changed"), packed.get("msg")
    assert "mysite" in packed["left_out"] and "inventories/mysite" in packed["left_out"]
    with tarfile.open(os.path.join(root, "collection", packed["tarball"])) as archive:
        names = archive.getnames()
        content = b"".join(archive.extractfile(m).read() for m in archive.getmembers() if m.isfile())
    assert "roles/r/tasks/main.yml" in names and "inventories/example/hosts" in names
    assert not [n for n in names if "mysite" in n or n.startswith(".git")]
    assert b"site-secret" not in content and b"site_secret" not in content
    assert os.listdir(os.path.join(root, ".state")) == ["collection.json"]  # the staging folders are gone
    assert not run(bundle_collection, {"root": root, "src": str(src), "version": "0.1.0"}, capsys)["changed"]
    # an example inventory edited in place with a real token is refused, never packed or echoed
    (src / "inventories/example/group_vars").mkdir()
    (src / "inventories/example/group_vars/all.yml").write_text("tensorfold_hf_token: hf_site_secret\n")
    refused = run(bundle_collection, {"root": root, "src": str(src), "version": "0.2.0"}, capsys)
    assert refused["failed"] and "inventories/example/group_vars/all.yml:1 (tensorfold_hf_token)" in refused["msg"]
    assert "hf_site_secret" not in json.dumps(refused)
    assert not os.path.exists(os.path.join(root, "collection", "glm53-tensorfold-0.2.0.tar.gz"))
