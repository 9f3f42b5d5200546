# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.glm53.tensorfold.plugins.modules import bundle_item, bundle_manifest, bundle_verify


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
