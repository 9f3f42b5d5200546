"""What converge (the peer strategy across three boxes) left on the boxes and on the Hub
emulator (Molecule's testinfra verifier runs this file). The operator's later runs - the same run
again (changed=0, no Hub request), a kill and resume, a corrupted shard, gated tokens, a local
checkpoint, check mode - are in ../cases.py, run by ../verify.yml as the side_effect step."""

import json
import os

import pytest
import testinfra

testinfra_hosts = ["gpu_hosts"]

DATA = "/srv/glm53"
STATE = DATA + "/.state/weights"
FOLDERS = {"model": "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold", "drafter": "incoai/GLM-5.3-Flash-DFlash2"}

# Runs in a box: every file under a folder, relative path -> [size, mtime_ns, mode, sha256].
FILES = r"""
import hashlib, json, os, sys
root, out = sys.argv[1], {}
for folder, _, names in os.walk(root):
    for name in names:
        path = os.path.join(folder, name)
        st, digest = os.stat(path), hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        out[os.path.relpath(path, root)] = [st.st_size, st.st_mtime_ns, "%o" % (st.st_mode & 0o7777), digest.hexdigest()]
print(json.dumps(out))
"""


def hub():
    """The Hub emulator's box (the one host of its group)."""
    boxes = testinfra.get_hosts(["ansible://weights_fetch_hub"], ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    assert len(boxes) == 1, boxes
    return boxes[0]


def files(host, root):
    return json.loads(host.check_output("python3 -c %s %s", FILES, root))


def served_bytes_per_file(log):
    """Bytes the Hub sent per file: resolve (small files) and CDN (LFS files) GETs that carried bytes."""
    sent = {}
    for entry in log:
        if entry["method"] == "GET" and entry["status"] in (200, 206) and (
                "/resolve/" in entry["path"] or "/cdn-lfs/" in entry["path"]):
            sent.setdefault(entry["path"], []).append(entry["bytes"])
    return sent


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_each_folder_holds_every_file_of_the_pinned_repository_byte_for_byte(host, folder):
    on_box = files(host, "%s/%s" % (DATA, folder))
    on_hub = files(hub(), "/repos/" + FOLDERS[folder])
    assert {path: entry[3] for path, entry in on_box.items()} == {path: entry[3] for path, entry in on_hub.items()}


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_served_files_are_read_only(host, folder):
    modes = {path: entry[2] for path, entry in files(host, "%s/%s" % (DATA, folder)).items()}
    assert set(modes.values()) == {"444"}, modes


def verified_records(host, state):
    """The verifications a run trusts (docs/weights_fetch.md): verified.json, plus those of this
    boot in verified-unsynced.json (recorded before the disk had the bytes; they hold until a
    reboot). Read from the box's own files and boot id."""
    records = {}
    if host.file(state + "/verified.json").exists:
        records.update(json.loads(host.file(state + "/verified.json").content_string))
    unsynced = host.file(state + "/verified-unsynced.json")
    if unsynced.exists:
        data = json.loads(unsynced.content_string)
        assert data.get("boot_id") == host.file("/proc/sys/kernel/random/boot_id").content_string.strip()
        records.update(data.get("records") or {})
    return records


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_every_file_is_recorded_as_verified_at_its_current_size_and_mtime(host, folder):
    """The record the next run trusts instead of hashing again: one per file, under the pinned
    commit's listing, keyed by the size and mtime the file has now, with the Hub's sha256 for LFS files."""
    state = "%s/%s" % (STATE, folder)
    listings = host.check_output("cd %s && ls listing-*.json", state).split()
    assert len(listings) == 1, listings
    commit = listings[0][len("listing-"):-len(".json")]
    records = verified_records(host, state)
    on_box = files(host, "%s/%s" % (DATA, folder))
    assert len(records) == len(on_box)
    for path, (size, mtime_ns, _, sha256) in on_box.items():
        key = "%s|%s|%d|%d" % (commit, path, size, mtime_ns)
        assert key in records, "%s has no verification record at its current size and mtime" % path
        assert len(records[key]) == 40 or records[key] == sha256, path  # a git oid (small file) or the sha256


def test_no_partial_download_is_left_behind(host):
    left = host.check_output("find %s -type f \\( -name '*.incomplete' -o -path '*/partial/*' \\)", DATA)
    assert left == ""


def test_the_hub_sent_each_file_once_for_three_boxes():
    """Converge with the peer strategy: one Hub download per file in all (the seed's), the other
    boxes copied from it; exactly one copy's bytes."""
    log = [json.loads(line) for line in hub().file("/var/log/hub.jsonl").content_string.splitlines() if line.strip()]
    sent = served_bytes_per_file(log)
    assert all(len(times) == 1 for times in sent.values()), sent
    one_copy = sum(entry[0] for repo in FOLDERS.values() for entry in files(hub(), "/repos/" + repo).values())
    assert sum(times[0] for times in sent.values()) == one_copy
