# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

import pytest

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle


def write(path, data):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "wb") as handle:
        handle.write(data)


def make_item(root, name, files):
    for rel, data in files.items():
        write(os.path.join(root, name, rel), data)
    hasher = bundle.Hasher(root)
    record = bundle.describe_item(root, name, "weights", {"revision": "a" * 40}, hasher)
    hasher.save()
    return record


def test_item_lists_every_file_with_size_and_sha256(tmp_path):
    root = str(tmp_path)
    record = make_item(root, "weights/model", {"config.json": b"{}", "m/shard-1.safetensors": b"x" * 10})
    assert [f["path"] for f in record["files"]] == ["config.json", "m/shard-1.safetensors"]
    assert record["files"][1] == {"path": "m/shard-1.safetensors", "size": 10,
                                  "sha256": hashlib.sha256(b"x" * 10).hexdigest()}
    assert record["size"] == 12 and len(record["sha256"]) == 64


def test_unchanged_files_are_not_read_again_but_a_write_is_seen(tmp_path):
    root = str(tmp_path)
    make_item(root, "weights/model", {"a.bin": b"1" * 100})
    again = bundle.Hasher(root)
    bundle.describe_item(root, "weights/model", "weights", {}, again)
    assert again.bytes_read == 0
    path = os.path.join(root, "weights/model/a.bin")
    st = os.stat(path)
    with open(path, "r+b") as handle:  # flip a byte, then put the mtime back
        handle.write(b"2")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = bundle.Hasher(root)
    record = bundle.describe_item(root, "weights/model", "weights", {}, third)
    assert third.bytes_read == 100
    assert record["files"][0]["sha256"] == hashlib.sha256(b"2" + b"1" * 99).hexdigest()


def test_item_names_stay_inside_the_bundle():
    for bad in ("../x", "/abs", ".state/items", "a//b", ""):
        with pytest.raises(bundle.BundleError):
            bundle.check_item_name(bad)
    assert bundle.check_item_name("weights/model-ablit") == "weights/model-ablit"


def test_empty_or_missing_item_is_named(tmp_path):
    with pytest.raises(bundle.BundleError) as err:
        bundle.describe_item(str(tmp_path), "image", "image", {}, bundle.Hasher(str(tmp_path)))
    assert err.value.items == ["image"]


def test_manifest_verifies_and_names_each_wrong_item_and_file(tmp_path):
    root = str(tmp_path)
    records = [make_item(root, "weights/model", {"config.json": b"{}", "s.safetensors": b"abc"}),
               make_item(root, "image", {"image.tar": b"tar"}),
               make_item(root, "toolkit", {"gpgkey": b"k"})]
    manifest = bundle.assemble_manifest(records)
    assert manifest["size"] == 2 + 3 + 3 + 1
    assert bundle.verify_bundle(root, manifest, bundle.Hasher(root, use_cache=False)) == []
    write(os.path.join(root, "weights/model/s.safetensors"), b"abd")
    os.unlink(os.path.join(root, "image/image.tar"))
    write(os.path.join(root, "toolkit/stray"), b"")
    problems = bundle.verify_bundle(root, manifest, bundle.Hasher(root, use_cache=False))
    assert [p["item"] for p in problems] == ["image", "toolkit", "weights/model"]
    assert "s.safetensors sha256 differs" in problems[2]["what"]
    assert "image.tar missing" in problems[0]["what"]
    assert "stray is not in the manifest" in problems[1]["what"]
    assert bundle.verify_bundle(root, manifest, bundle.Hasher(root), ["drafter"])[0]["item"] == "drafter"


def test_size_change_is_named_without_hashing(tmp_path):
    root = str(tmp_path)
    manifest = bundle.assemble_manifest([make_item(root, "image", {"image.tar": b"tar"})])
    write(os.path.join(root, "image/image.tar"), b"tarball")
    hasher = bundle.Hasher(root, use_cache=False)
    problems = bundle.verify_bundle(root, manifest, hasher)
    assert "image.tar has 7 bytes, the manifest says 3" in problems[0]["what"] and hasher.bytes_read == 0


def test_nested_items_do_not_count_as_extra_files(tmp_path):
    root = str(tmp_path)
    manifest = bundle.assemble_manifest([make_item(root, "image", {"image.tar": b"t"}),
                                         make_item(root, "image/patch-series", {"0001-a.patch": b"p"})])
    assert bundle.verify_bundle(root, manifest, bundle.Hasher(root)) == []


def test_pins_name_the_item_and_the_wanted_value():
    manifest = {"items": {"weights/model": {"meta": {"revision": "a" * 40}}}}
    assert bundle.pin_problems(manifest, {"weights/model": {"revision": "a" * 40}}) == []
    wrong = bundle.pin_problems(manifest, {"weights/model": {"revision": "b" * 40}})
    assert wrong[0]["item"] == "weights/model" and "b" * 40 in wrong[0]["what"]


def test_copy_resumes_from_the_committed_offset(tmp_path):
    src, dst = str(tmp_path / "src.bin"), str(tmp_path / "out" / "dst.bin")
    data = os.urandom(3 * 1024 * 1024 + 5)
    write(src, data)
    os.makedirs(os.path.dirname(dst))
    # a killed copy: 2 MiB committed, then torn garbage after it
    write(dst + ".partial", data[:2 * 1024 * 1024] + b"garbage")
    write(dst + ".partial.offset", b"2097152\n")
    copied, written = bundle.copy_resumable(src, dst, commit_bytes=1024 * 1024)
    assert copied and written == len(data) - 2 * 1024 * 1024
    with open(dst, "rb") as handle:
        assert handle.read() == data
    assert not os.path.exists(dst + ".partial") and not os.path.exists(dst + ".partial.offset")
    assert bundle.copy_resumable(src, dst) == (False, 0)


def test_copy_starts_over_when_the_mark_is_beyond_the_partial(tmp_path):
    src, dst = str(tmp_path / "a"), str(tmp_path / "b")
    write(src, b"0123456789")
    write(dst + ".partial", b"01")
    write(dst + ".partial.offset", b"9\n")
    assert bundle.copy_resumable(src, dst) == (True, 10)


def test_copy_tree_copies_only_what_differs(tmp_path):
    src = str(tmp_path / "s")
    write(os.path.join(src, "a"), b"1")
    write(os.path.join(src, "d/b"), b"22")
    dst = str(tmp_path / "d")
    assert bundle.copy_tree(src, dst) == (2, 3)
    assert bundle.copy_tree(src, dst) == (0, 0)
    write(os.path.join(src, "d/b"), b"23")
    assert bundle.copy_tree(src, dst) == (1, 2)


def test_manifest_written_only_when_it_changes(tmp_path):
    path = str(tmp_path / "m.json")
    assert bundle.write_json_if_changed(path, {"a": 1}) is True
    assert bundle.write_json_if_changed(path, {"a": 1}) is False
    assert bundle.write_json_if_changed(path, {"a": 2}) is True


PACKAGES = """Package: nvidia-container-toolkit
Version: 1.18.1-1
Architecture: amd64
Filename: ./nvidia-container-toolkit_1.18.1-1_amd64.deb
Size: 10
SHA256: aa
Description: x
 continued

Package: nvidia-container-toolkit
Version: 1.18.2-1
Architecture: amd64
Filename: ./nvidia-container-toolkit_1.18.2-1_amd64.deb
Size: 11
SHA256: bb

Package: libnvidia-container1
Version: 1.18.2-1
Architecture: arm64
Filename: ./libnvidia-container1_1.18.2-1_arm64.deb
Size: 12
SHA256: cc
"""


def test_packages_index_pinned_selection():
    stanzas = bundle.parse_packages(PACKAGES)
    assert stanzas[0]["Description"] == "x\ncontinued"
    chosen = bundle.select_packages(stanzas, ["nvidia-container-toolkit"], "1.18.2-1", "amd64")
    assert chosen == [{"name": "nvidia-container-toolkit", "filename": "./nvidia-container-toolkit_1.18.2-1_amd64.deb",
                       "size": 11, "sha256": "bb"}]
    with pytest.raises(bundle.BundleError) as err:
        bundle.select_packages(stanzas, ["nvidia-container-toolkit", "libnvidia-container1"], "1.18.3-1", "amd64")
    assert "nvidia-container-toolkit=1.18.3-1 (the repository has 1.18.1-1, 1.18.2-1)" in err.value.what
    assert "libnvidia-container1=1.18.3-1 (the repository has 1.18.2-1)" in err.value.what


def test_packages_index_refuses_paths_outside_the_repository():
    stanzas = bundle.parse_packages("Package: p\nVersion: 1\nArchitecture: all\nFilename: ../../etc/x.deb\n")
    with pytest.raises(bundle.BundleError):
        bundle.select_packages(stanzas, ["p"], "1", "amd64")
