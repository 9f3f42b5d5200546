# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import tarfile

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.glm53.tensorfold.plugins.modules import bundle_collection, bundle_item, bundle_manifest, bundle_verify


def run(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_build_twice_changes_nothing_then_verify_names_the_corrupted_item(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes(b"{}")
    (src / "model.safetensors").write_bytes(b"w" * 4096)
    root = str(tmp_path / "bundle")
    first = run(bundle_item, {"root": root, "name": "weights/model", "kind": "weights", "src": str(src),
                              "meta": {"revision": "a" * 40}}, capsys)
    assert first["changed"] and first["copied_files"] == 2 and first["copied_bytes"] == 4098
    made = run(bundle_manifest, {"root": root, "items": ["weights/model"]}, capsys)
    assert made["changed"] and made["size"] == 4098
    second = run(bundle_item, {"root": root, "name": "weights/model", "kind": "weights", "src": str(src),
                               "meta": {"revision": "a" * 40}}, capsys)
    assert not second["changed"] and second["copied_bytes"] == 0 and second["hashed_bytes"] == 0
    assert not run(bundle_manifest, {"root": root, "items": ["weights/model"]}, capsys)["changed"]
    good = run(bundle_verify, {"root": root}, capsys)
    assert good["problems"] == [] and good["hashed_bytes"] == 4098
    with open(os.path.join(root, "weights/model/model.safetensors"), "r+b") as handle:
        handle.seek(100)
        handle.write(b"x")
    bad = run(bundle_verify, {"root": root}, capsys)
    assert bad["failed"] and bad["code"] == "E_BUNDLE"
    assert "weights/model: model.safetensors sha256 differs" in bad["msg"]
    # the pre-flight's form: cached hashes, problems returned, pins checked
    quick = run(bundle_verify, {"root": root, "rehash": False, "fail_on_problem": False,
                                "items": ["weights/model", "image"],
                                "pins": {"weights/model": {"revision": "b" * 40}}}, capsys)
    assert sorted(p["item"] for p in quick["problems"]) == ["image", "weights/model", "weights/model"]


def test_manifest_names_items_not_built_yet(tmp_path, capsys):
    result = run(bundle_manifest, {"root": str(tmp_path), "items": ["image"]}, capsys)
    assert result["failed"] and result["missing"] == ["image"] and "[E_BUNDLE]" in result["msg"]


def test_verify_without_manifest(tmp_path, capsys):
    result = run(bundle_verify, {"root": str(tmp_path), "fail_on_problem": False}, capsys)
    assert result["problems"][0]["item"] == "MANIFEST.json"


def test_a_damaged_image_archive_is_dropped_not_recorded_and_the_next_save_restores_it(tmp_path, capsys):
    saved = tmp_path / "image.tar"
    saved.write_bytes(b"i" * 8192)
    root = str(tmp_path / "bundle")
    item = {"root": root, "name": "image", "kind": "image", "meta": {"id": "sha256:1"}}
    good = run(bundle_item, dict(item, src=str(saved)), capsys)["item"]
    with open(os.path.join(root, "image/image.tar"), "r+b") as handle:
        handle.truncate(1000)
    checked = run(bundle_item, dict(item, state="checked", _ansible_check_mode=True), capsys)
    assert checked["changed"] and checked["damaged"] == ["image/image.tar has 1000 bytes, its record says 8192"]
    assert os.path.getsize(os.path.join(root, "image/image.tar")) == 1000  # check mode: only named
    checked = run(bundle_item, dict(item, state="checked"), capsys)
    assert checked["removed"] == ["image.tar"] and not os.path.exists(os.path.join(root, "image/image.tar"))
    again = run(bundle_item, dict(item, src=str(saved)), capsys)  # the part saves it again
    assert again["item"] == good
    assert not run(bundle_item, dict(item, state="checked"), capsys)["changed"]


def test_an_item_keeps_only_what_its_source_brings(tmp_path, capsys):
    series = tmp_path / "series"
    series.mkdir()
    (series / "0001-a.patch").write_bytes(b"a")
    (series / "0002-b.patch").write_bytes(b"b")
    root = str(tmp_path / "bundle")
    item = {"root": root, "name": "image-series", "kind": "inputs", "src": str(series), "prune": True}
    run(bundle_item, item, capsys)
    (series / "0002-b.patch").rename(series / "0002-b-renamed.patch")
    planned = run(bundle_item, dict(item, _ansible_check_mode=True), capsys)
    assert planned["changed"] and planned["removed"] == ["0002-b.patch"]
    result = run(bundle_item, item, capsys)
    assert [f["path"] for f in result["item"]["files"]] == ["0001-a.patch", "0002-b-renamed.patch"]
    assert not run(bundle_item, item, capsys)["changed"]
    assert not run(bundle_item, dict(item, _ansible_check_mode=True), capsys)["changed"]
    # an older collection tarball goes; only the named one stays
    os.makedirs(os.path.join(root, "collection"))
    for version in ("0.0.9", "0.1.0"):
        with open(os.path.join(root, "collection", "glm53-tensorfold-%s.tar.gz" % version), "wb") as handle:
            handle.write(version.encode())
    kept = run(bundle_item, {"root": root, "name": "collection", "kind": "collection", "prune": True,
                             "keep": ["glm53-tensorfold-0.1.0.tar.gz"]}, capsys)
    assert [f["path"] for f in kept["item"]["files"]] == ["glm53-tensorfold-0.1.0.tar.gz"]


def test_verify_refuses_a_bundle_built_in_parts_and_one_of_another_version(tmp_path, capsys):
    root = str(tmp_path)
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "image.tar").write_bytes(b"t")
    run(bundle_item, {"root": root, "name": "image", "kind": "image"}, capsys)
    partial = run(bundle_manifest, {"root": root, "items": ["image", "weights/model"], "allow_missing": True,
                                    "meta": {"collection_version": "0.1.0"}}, capsys)
    assert partial["missing"] == ["weights/model"]
    bad = run(bundle_verify, {"root": root}, capsys)  # --tags verify with no items named
    assert bad["failed"] and bad["code"] == "E_BUNDLE" and "weights/model is not in the bundle (not built yet)" in bad["msg"]
    other = run(bundle_verify, {"root": root, "items": ["image"], "collection_version": "0.2.0"}, capsys)
    assert other["failed"] and other["code"] == "E_BUNDLE_VERSION"
    assert "built by glm53.tensorfold 0.1.0, this controller runs 0.2.0" in other["msg"]
    assert "ansible-galaxy collection install" in other["msg"]
    same = run(bundle_verify, {"root": root, "items": ["image"], "collection_version": "0.1.0"}, capsys)
    assert same["problems"] == [] and same["version_problem"] is None


def test_an_installed_copy_is_packed_as_its_files_json_lists_and_a_vault_file_is_refused(tmp_path, capsys):
    src = tmp_path / "installed"
    files = {"MANIFEST.json": "{}", "roles/r/tasks/main.yml": "---\n",
             "FILES.json": json.dumps({"files": [{"name": "roles/r/tasks/main.yml", "ftype": "file"}]}),
             "inventories/mysite/group_vars/all.yml": "tensorfold_hf_token: hf_site_secret\n"}
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    root = str(tmp_path / "bundle")
    packed = run(bundle_collection, {"root": root, "src": str(src), "version": "0.1.0"}, capsys)
    assert packed["left_out"] == ["inventories/mysite/group_vars/all.yml"]
    with tarfile.open(os.path.join(root, "collection", packed["tarball"])) as archive:
        assert sorted(archive.getnames()) == ["FILES.json", "MANIFEST.json", "roles/r/tasks/main.yml"]
    (src / "roles/r/tasks/main.yml").write_text("$ANSIBLE_VAULT;1.1;AES256\n31\n")
    refused = run(bundle_collection, {"root": root, "src": str(src), "version": "0.2.0"}, capsys)
    assert refused["failed"] and "roles/r/tasks/main.yml (a vault file)" in refused["msg"]


def test_the_collection_is_packed_again_when_a_file_changed_without_a_version_bump(tmp_path, capsys):
    src = tmp_path / "installed"
    files = {"MANIFEST.json": "{}", "files/patches/0001-site.patch": "--- a\n",
             "FILES.json": json.dumps({"files": [{"name": "files/patches/0001-site.patch", "ftype": "file"}]})}
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    root = str(tmp_path / "bundle")
    args = {"root": root, "src": str(src), "version": "0.1.0"}
    first = run(bundle_collection, args, capsys)
    same = run(bundle_collection, args, capsys)
    assert first["changed"] and not same["changed"] and same["members_sha256"] == first["members_sha256"]
    (src / "files/patches/0001-site.patch").write_text("--- b\n")
    with patch_module_args(dict(args, _ansible_check_mode=True)):
        with pytest.raises(SystemExit):
            bundle_collection.main()
    assert json.loads(capsys.readouterr().out)["changed"]
    again = run(bundle_collection, args, capsys)
    assert again["changed"] and again["tarball"] == first["tarball"] and again["members_sha256"] != first["members_sha256"]
    with tarfile.open(os.path.join(root, "collection", again["tarball"])) as archive:
        assert archive.extractfile("files/patches/0001-site.patch").read() == b"--- b\n"
    assert not run(bundle_collection, args, capsys)["changed"]


def test_a_bundle_unpacked_without_its_state_folder_is_read_once(tmp_path, capsys, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.safetensors").write_bytes(b"w" * 4096)
    root = str(tmp_path / "bundle")
    run(bundle_item, {"root": root, "name": "weights/model", "kind": "weights", "src": str(src)}, capsys)
    run(bundle_manifest, {"root": root, "items": ["weights/model"]}, capsys)
    shutil.rmtree(os.path.join(root, ".state"))  # as the tarball route leaves it
    quick = {"root": root, "rehash": False, "fail_on_problem": False}
    assert run(bundle_verify, quick, capsys)["hashed_bytes"] == 4096
    assert run(bundle_verify, quick, capsys)["hashed_bytes"] == 0
    # a bundle that cannot be written keeps its cache in the controller's cache folder
    shutil.rmtree(os.path.join(root, ".state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert run(bundle_verify, quick, capsys)["hashed_bytes"] == 4096
    assert run(bundle_verify, quick, capsys)["hashed_bytes"] == 0
    assert not os.path.exists(os.path.join(root, ".state"))
    assert len(os.listdir(str(tmp_path / "home/.cache/glm53-tensorfold/bundle-hashes"))) == 1
