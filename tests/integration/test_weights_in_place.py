# -*- coding: utf-8 -*-
"""Re-runs with the weights in place: the disk check asks no space for weights verified in
place, and gated Ablit weights verified in place serve without the HF token (it is asked for only
when gated files must be downloaded).

Real ansible-playbook on this controller (connection local), the real huggingface_hub client and
the Hub emulator (tests/standins/hub) on loopback; weights_fetch's own tasks do the download.
"""

import json
import os
import sys

import pytest

from ansible_run import run_playbook
from emulator_process import running_hub

ABLIT = "Mia-AiLab/GLM-5.3-Flash-EXL3-4bpw-TensorFold-Ablit"
ABLIT_COMMIT = "57edefd2f5d9b371c8345883304d5af68b52fa24"
TOKEN = "hf_inPlaceCanaryToken6160"

FETCH = """
- hosts: box
  gather_facts: false
  tasks:
    - name: Fetch the Ablit weights the role's way
      ansible.builtin.include_role:
        name: glm53.tensorfold.weights_fetch
        tasks_from: snapshot
      vars:
        weights_fetch_repo:
          name: model-ablit
          repo_id: %s
          revision: %s
          gated: true
          local_dir: "{{ tensorfold_data_dir }}/model-ablit"
          state_dir: "{{ tensorfold_data_dir }}/.state/weights/model-ablit"
""" % (ABLIT, ABLIT_COMMIT)

DISK = """
- hosts: box
  gather_facts: false
  tasks:
    - name: Measure the disk as gpu_host_checks does (the checkpoint asks far more than is free)
      glm53.tensorfold.host_resources:
        paths:
          - name: checkpoint
            path: "{{ tensorfold_data_dir }}/model-ablit"
            need_gib: 100000
            state_dir: "{{ tensorfold_data_dir }}/.state/weights/model-ablit"
            revision: %s
      register: disk
    - name: Keep it for the test
      ansible.builtin.copy:
        content: "{{ disk.filesystems | to_json }}"
        dest: "{{ tensorfold_data_dir }}/../disk.json"
        mode: "0644"
""" % ABLIT_COMMIT


@pytest.fixture(name="hub", scope="module")
def hub_fixture(tmp_path_factory):
    root = tmp_path_factory.mktemp("repos")
    log = root.parent / (root.name + "-hub.jsonl")
    with running_hub(root, shard_mib=1, tokens="accepted:%s" % TOKEN, log=log) as url:
        yield url, log


def inventory(tmp_path, hub_url, data, token):
    path = tmp_path / ("hosts-%s.json" % ("token" if token else "none"))
    path.write_text(json.dumps({"all": {"hosts": {"box": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "tensorfold_data_dir": str(data), "tensorfold_ablit": True, "tensorfold_hf_token": token,
        "weights_fetch_endpoint": hub_url, "weights_fetch_use_token": True,
        "weights_fetch_client_ready": True, "weights_fetch_python": sys.executable, "weights_fetch_client_dir": "",
        "weights_fetch_state_root": str(data / ".state" / "weights"), "weights_fetch_progress_interval": 1}}}}))
    return path


def play(tmp_path, text, inv):
    playbook = tmp_path / "play.yml"
    playbook.write_text(text)
    return run_playbook(playbook, inv, tmp_path, timeout=300)


def disk(data):
    return json.loads((data.parent / "disk.json").read_text())


def test_gated_weights_in_place_need_no_token_and_no_space(tmp_path, hub):
    hub_url, log = hub
    data = tmp_path / "data"
    data.mkdir()  # a fresh host: nothing under DATA_DIR yet
    rc, out = play(tmp_path, DISK, inventory(tmp_path, hub_url, data, ""))
    assert rc == 0, out[-3000:]
    before = disk(data)[0]
    assert before["ok"] is False and before["need_gib"] == 100000, before

    rc, out = play(tmp_path, FETCH, inventory(tmp_path, hub_url, data, ""))
    assert rc != 0 and "[E_HF_TOKEN]" in out and "must be downloaded, but no token was given" in out, out[-3000:]
    assert not os.path.exists(str(data / "model-ablit" / "model-00001-of-00002.safetensors"))

    rc, out = play(tmp_path, FETCH, inventory(tmp_path, hub_url, data, TOKEN))
    assert rc == 0, out[-3000:]
    # The download read the token from its root-only file and removed it: no file keeps the token.
    assert not (data / ".state" / "weights" / "model-ablit.hf-token").exists()
    assert not [path for path in data.rglob("*") if path.is_file() and TOKEN in path.read_bytes().decode("latin-1")]

    rc, out = play(tmp_path, DISK, inventory(tmp_path, hub_url, data, ""))
    assert rc == 0, out[-3000:]
    after = disk(data)[0]
    assert after["ok"] is True and after["need_gib"] == 0 and after["paths"][0]["in_place"] == "verified in place"

    requests = len(log.read_text().splitlines())
    rc, out = play(tmp_path, FETCH, inventory(tmp_path, hub_url, data, ""))
    assert rc == 0, "verified Ablit weights in place failed without a token: " + out[-3000:]
    assert "E_HF_TOKEN" not in out
    assert len(log.read_text().splitlines()) == requests, "the re-run without a token talked to the Hub"
    assert TOKEN not in out


def recap_changed(out):
    line = [row for row in out.splitlines() if row.startswith("box ")][-1]
    return int(line.split("changed=")[1].split()[0])


def test_weights_in_place_whose_records_were_lost_are_hashed_and_recorded_once(tmp_path, hub):
    hub_url, log = hub
    data = tmp_path / "data"
    data.mkdir()
    rc, out = play(tmp_path, FETCH, inventory(tmp_path, hub_url, data, TOKEN))
    assert rc == 0, out[-3000:]
    state = data / ".state" / "weights" / "model-ablit"
    # This boot's verifications go to verified-unsynced.json until a later run syncs them.
    records = [state / "verified.json", state / "verified-unsynced.json"]
    assert any(path.exists() for path in records)
    for path in records:  # a state folder restored from an old backup, weights put in place by hand
        if path.exists():
            path.unlink()

    requests = len(log.read_text().splitlines())
    rc, out = play(tmp_path, FETCH, inventory(tmp_path, hub_url, data, ""))
    assert rc == 0, out[-3000:]
    assert any(path.exists() for path in records), "the files the plan found good were not recorded: " + out[-3000:]
    assert recap_changed(out) == 1, out[-3000:]
    assert "0 bytes fetched" in out, out[-3000:]

    rc, out = play(tmp_path, FETCH, inventory(tmp_path, hub_url, data, ""))
    assert rc == 0 and recap_changed(out) == 0, "the next run hashed or fetched again: " + out[-3000:]
    assert len(log.read_text().splitlines()) == requests, "a run after the records were lost talked to the Hub"
