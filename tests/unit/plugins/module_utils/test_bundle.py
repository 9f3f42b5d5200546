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


# --- what the collection carries into the bundle ----------------------------------------------
def make_checkout(root):
    files = {
        "galaxy.yml": b"namespace: glm53\nname: tensorfold\nversion: 0.1.0\n",
        "README.md": b"readme", "LICENSE": b"license", ".gitignore": b"/.venv\n",
        "roles/r/tasks/main.yml": b"---\n", "plugins/modules/m.py": b"#",
        "plugins/modules/__pycache__/m.cpython-312.pyc": b"\0",
        "inventories/example/group_vars/all.yml": b'# tensorfold_hf_token: "{{ vault_tensorfold_hf_token }}"\n',
        "inventories/mysite/group_vars/vault.yml": b"$ANSIBLE_VAULT;1.1;AES256\n6162\n",
        "mysite/group_vars/all.yml": b"tensorfold_hf_token: hf_site_secret\n",
        "molecule/default/molecule.yml": b"---\n", "tests/standins/x.py": b"#", "tests/unit/test_x.py": b"#",
    }
    for rel, data in files.items():
        write(os.path.join(root, rel), data)


def test_collection_members_leave_a_site_inventory_and_dotfiles_out(tmp_path):
    src = str(tmp_path)
    make_checkout(src)
    members, left_out = bundle.collection_members(src)
    assert members == ["LICENSE", "README.md", "galaxy.yml", "inventories/example/group_vars/all.yml",
                       "plugins/modules/m.py", "roles/r/tasks/main.yml", "tests/unit/test_x.py"]
    assert "mysite" in left_out and "inventories/mysite" in left_out and ".gitignore" in left_out
    assert bundle.secret_problems(src, members) == []


def test_installed_copy_packs_exactly_what_its_files_json_lists(tmp_path):
    src = str(tmp_path)
    write(os.path.join(src, "MANIFEST.json"), b"{}")
    write(os.path.join(src, "FILES.json"), b'{"files": [{"name": ".", "ftype": "dir"}, {"name": "roles/r/main.yml", "ftype": "file"}]}')
    write(os.path.join(src, "roles/r/main.yml"), b"---\n")
    write(os.path.join(src, "inventories/mysite/group_vars/all.yml"), b"tensorfold_api_key: k\n")
    members, left_out = bundle.collection_members(src)
    assert members == ["FILES.json", "MANIFEST.json", "roles/r/main.yml"]
    assert left_out == ["inventories/mysite/group_vars/all.yml"]
    os.unlink(os.path.join(src, "roles/r/main.yml"))
    with pytest.raises(bundle.BundleError):
        bundle.collection_members(src)


def test_a_literal_secret_or_a_vault_file_in_a_packed_file_is_named_never_its_value(tmp_path):
    src = str(tmp_path)
    write(os.path.join(src, "inventories/example/group_vars/all.yml"), (
        b'tensorfold_api_key: "{{ vault_tensorfold_api_key }}"\n'
        b"tensorfold_hf_token: hf_abcdef  # mine\n"
        b"# tensorfold_hf_token: hf_commented\n"
        b'tensorfold_hf_token: ""\n'
        b"all:\n  vars:\n    tensorfold_api_key: >-\n      {{ lookup('file', 'key') }}\n"
        b"    vault_tensorfold_api_key: |\n      sk-literal\n"))
    write(os.path.join(src, "inventories/example/group_vars/vault.yml"), b"$ANSIBLE_VAULT;1.1;AES256\n31\n")
    write(os.path.join(src, "docs/examples/vault.yml.example"), b'vault_tensorfold_hf_token: "hf_REPLACE_ME"\n')
    write(os.path.join(src, "tests/unit/test_x.py"), b'SETTINGS = {"tensorfold_api_key": "k"}\n')
    write(os.path.join(src, "roles/r/vars/vault.yml"), b"$ANSIBLE_VAULT;1.1;AES256\n31\n")
    members = ["docs/examples/vault.yml.example", "inventories/example/group_vars/all.yml",
               "inventories/example/group_vars/vault.yml", "roles/r/vars/vault.yml", "tests/unit/test_x.py"]
    found = bundle.secret_problems(src, members)
    assert found == ["inventories/example/group_vars/all.yml:2 (tensorfold_hf_token)",
                     "inventories/example/group_vars/all.yml:9 (vault_tensorfold_api_key)",
                     "inventories/example/group_vars/vault.yml (a vault file)", "roles/r/vars/vault.yml (a vault file)"]
    assert not any("hf_abcdef" in f or "sk-literal" in f for f in found)


INVENTORY_LINES = {
    "inventories/example/hosts.ini": (b"[gpu_hosts]\n"
                                      b"gpu-01 ansible_host=10.0.0.1 tensorfold_api_key=sk-ini-literal\n"
                                      b"gpu-02 ansible_host=10.0.0.2 tensorfold_api_key=\"{{ vault_tensorfold_api_key }}\"\n"
                                      b"; gpu-03 tensorfold_hf_token=hf_commented\n"),
    "inventories/example/hosts.yml": (b"gpu_hosts:\n  hosts:\n"
                                      b"    gpu-01: {ansible_host: 10.0.0.1, tensorfold_hf_token: hf_flow_literal}\n"
                                      b"    gpu-02: {ansible_host: 10.0.0.2, tensorfold_api_key: '{{ vault_key }}', "
                                      b"note: tensorfold_api_key}\n"),
}


def test_a_literal_secret_on_an_ini_host_line_or_in_a_flow_mapping_is_named(tmp_path):
    for rel, text in INVENTORY_LINES.items():
        write(str(tmp_path / rel), text)
    assert bundle.secret_problems(str(tmp_path), sorted(INVENTORY_LINES)) == [
        "inventories/example/hosts.ini:2 (tensorfold_api_key)", "inventories/example/hosts.yml:3 (tensorfold_hf_token)"]


# --- an item matches its source; a damaged file is not recorded as correct ------------------
def test_prune_leaves_only_what_the_source_brings_and_what_is_kept(tmp_path):
    root = str(tmp_path)
    series = str(tmp_path / "series")
    write(os.path.join(series, "0001-a.patch"), b"a")
    write(os.path.join(series, "0002-old-name.patch"), b"b")
    bundle.copy_tree(series, os.path.join(root, "image-series"))
    os.rename(os.path.join(series, "0002-old-name.patch"), os.path.join(series, "0002-new-name.patch"))
    bundle.copy_tree(series, os.path.join(root, "image-series"))
    wanted = bundle.source_files(series)
    assert bundle.prune_item(root, "image-series", wanted, dry_run=True) == ["0002-old-name.patch"]
    assert bundle.prune_item(root, "image-series", wanted) == ["0002-old-name.patch"]
    assert bundle.list_files(os.path.join(root, "image-series")) == ["0001-a.patch", "0002-new-name.patch"]
    # weights: the listing comes from src, files/ from hf_snapshot; an older listing goes
    for rel in ("files/a.safetensors", "files/sub/b.json", "listing-%s.json" % ("a" * 40), "listing-%s.json" % ("b" * 40)):
        write(os.path.join(root, "weights/model", rel), b"x")
    removed = bundle.prune_item(root, "weights/model", ["listing-%s.json" % ("b" * 40)], keep=["files"])
    assert removed == ["listing-%s.json" % ("a" * 40)]


def test_prune_spares_items_nested_in_the_item(tmp_path):
    root = str(tmp_path)
    make_item(root, "image", {"image.tar": b"t"})
    make_item(root, "image/patch-series", {"0001-a.patch": b"p"})
    bundle.write_json_if_changed(bundle.item_record_path(root, "image/patch-series"), {"name": "image/patch-series"})
    write(os.path.join(root, "image/old.tar"), b"o")
    assert bundle.prune_item(root, "image", ["image.tar"]) == ["old.tar"]
    assert os.path.isfile(os.path.join(root, "image/patch-series/0001-a.patch"))


def test_a_file_damaged_since_its_record_is_named_and_an_intact_one_is_not_read(tmp_path):
    root = str(tmp_path)
    record = make_item(root, "image", {"image.tar": b"t" * 1000, "ok.json": b"{}"})
    hasher = bundle.Hasher(root)
    assert bundle.damaged_files(root, "image", record, hasher) == [] and hasher.bytes_read == 0
    with open(os.path.join(root, "image/image.tar"), "r+b") as handle:
        handle.truncate(400)
    found = bundle.damaged_files(root, "image", record, bundle.Hasher(root))
    assert found == [{"path": "image.tar", "what": "image/image.tar has 400 bytes, its record says 1000"}]
    write(os.path.join(root, "image/image.tar"), b"u" + b"t" * 999)  # same size, other bytes
    assert "sha256 differs" in bundle.damaged_files(root, "image", record, bundle.Hasher(root))[0]["what"]
    os.unlink(os.path.join(root, "image/image.tar"))  # missing: its part makes it again
    assert bundle.damaged_files(root, "image", record, bundle.Hasher(root)) == []


# --- a complete bundle, of this version ---------------------------------------------------------
def test_items_not_built_yet_are_in_the_manifest_and_refused_by_verify(tmp_path):
    root = str(tmp_path)
    manifest = bundle.assemble_manifest([make_item(root, "image", {"image.tar": b"t"})], missing=["weights/model"])
    assert manifest["missing"] == ["weights/model"]
    problems = bundle.verify_bundle(root, manifest, bundle.Hasher(root))
    assert [p["item"] for p in problems] == ["weights/model"] and "not built yet" in problems[0]["what"]


def test_a_bundle_of_another_collection_version_is_named():
    assert bundle.version_problem({"meta": {"collection_version": "0.1.0"}}, "0.1.0") is None
    assert "built by glm53.tensorfold 0.0.9, this controller runs 0.1.0" in bundle.version_problem(
        {"meta": {"collection_version": "0.0.9"}}, "0.1.0")
    assert "unrecorded version" in bundle.version_problem({"meta": {}}, "0.1.0")


def test_pip_download_output_names_saved_and_already_downloaded_files():
    out = ("Collecting six==1.16.0\n  File was already downloaded /b/python/wheels/six-1.16.0-py2.py3-none-any.whl\n"
           "Collecting ansible-core\n  Downloading ansible_core-2.19.14-py3-none-any.whl (2 MB)\n"
           "Saved ./b/python/wheels/ansible_core-2.19.14-py3-none-any.whl\n"
           "Successfully downloaded six ansible-core\n")
    assert bundle.pip_download_files(out) == ["ansible_core-2.19.14-py3-none-any.whl", "six-1.16.0-py2.py3-none-any.whl"]


# The marker is put together here so that this file, a member of the bundle, holds none.
def key_marker(kind):
    return ("-----BEGIN " + kind + "PRIVATE KEY-----").encode()


def test_ansible_passwords_private_keys_and_a_value_on_the_next_line_are_named_never_their_value(tmp_path):
    files = {
        "inventories/example/hosts.ini": (b"[gpu_hosts]\n"
                                          b"gpu-01 ansible_host=10.0.0.1 ansible_password=pw-ini-literal\n"
                                          b"gpu-02 ansible_become_password=pw-become-literal\n"
                                          b"gpu-03 ansible_ssh_pass='{{ vault_ssh_pass }}'\n"),
        "inventories/example/group_vars/all.yml": (b"ansible_ssh_pass: pw-yaml-literal\n"
                                                   b"ansible_become_pass: \"{{ vault_become }}\"\n"
                                                   b"tensorfold_hf_token:\n  hf_next_line_literal\n"
                                                   b"vault_settings:\n  region: eu\n"
                                                   b"tensorfold_api_key:\n"
                                                   b"other: value\n"),
        "files/id_ed25519": key_marker("OPENSSH ") + b"\nb3BlbnNzaC1rZXk\n",
        "roles/r/files/key.pem": b"# a key\n" + key_marker("RSA ") + b"\nMIIE\n",
        "docs/key.md": b"text\n    " + key_marker("") + b"\nMIIE\n",
        "docs/public.md": b"-----BEGIN PUBLIC KEY-----\nMIIB\n",
    }
    for rel, text in files.items():
        write(str(tmp_path / rel), text)
    found = bundle.secret_problems(str(tmp_path), sorted(files))
    assert found == ["docs/key.md:2 (a private key)", "files/id_ed25519:1 (a private key)",
                     "inventories/example/group_vars/all.yml:1 (ansible_ssh_pass)",
                     "inventories/example/group_vars/all.yml:3 (tensorfold_hf_token)",
                     "inventories/example/hosts.ini:2 (ansible_password)",
                     "inventories/example/hosts.ini:3 (ansible_become_password)",
                     "roles/r/files/key.pem:2 (a private key)"]
    assert not any(secret in " ".join(found) for secret in ("pw-", "hf_next", "b3Bl", "MIIE"))
