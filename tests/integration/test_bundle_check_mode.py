# -*- coding: utf-8 -*-
"""site.yml --check with a bundle on a new box: the copies check mode reports are not written, so
what reads them (the seed's verify, the toolkit's file:// key) reports what it would do instead
of failing; a real run still fails on a key that is not there."""

import json
import os
import sys

from ansible_run import ROOT, run_playbook

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.set_fact:
        ansible_facts: {os_family: Debian, architecture: x86_64}
    - ansible.builtin.import_role: {name: glm53.tensorfold.nvidia_toolkit, tasks_from: repository_apt_key}
      vars:
        nvidia_toolkit_apt_repo_url: "file://{{ data }}/bundle/toolkit/deb"
        nvidia_toolkit_gpg_key_url: "file://{{ data }}/bundle/toolkit/gpgkey"
        nvidia_toolkit_apt_keyring: "{{ data }}/keyring/nvidia.asc"
    - ansible.builtin.include_tasks: "{{ bundle_tasks }}/deploy_weights.yml"
      loop: "{{ {'weights/model': repo} | dict2items }}"
      loop_control: {loop_var: bundle_repo}
"""


def run(tmp_path, *extra):
    revision = "a" * 40
    (tmp_path / "bundle/weights/model/files").mkdir(parents=True)
    (tmp_path / "bundle/weights/model/files/model.safetensors").write_bytes(b"w" * 4096)
    (tmp_path / ("bundle/weights/model/listing-%s.json" % revision)).write_text("{}")
    (tmp_path / "play.yml").write_text(PLAY)
    repo = {"sha256": "b" * 64, "size": 4096, "meta": {"repo_id": "org/model", "revision": revision}}
    variables = {"tensorfold_bundle": str(tmp_path / "bundle"), "tensorfold_data_dir": str(tmp_path / "data"),
                 "data": str(tmp_path / "data"), "bundle_host_dir": str(tmp_path / "data/bundle"),
                 "bundle_tasks": os.path.join(ROOT, "roles/bundle/tasks"), "repo": repo,
                 "ansible_python_interpreter": sys.executable}
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    rc, out = run_playbook(tmp_path / "play.yml", "localhost,", tmp_path,
                           extra_args=["-c", "local", "-e", "@%s" % (tmp_path / "vars.json")] + list(extra))
    return rc, " ".join(out.split())


def test_check_mode_on_a_new_box_reports_what_the_bundle_would_seed_and_install(tmp_path):
    rc, out = run(tmp_path, "--check")
    assert rc == 0, out[-3000:]
    assert "would seed weights/model (4.00 KB) from the bundle" in out
    assert "would install the repository key file://%s/data/bundle/toolkit/gpgkey" % tmp_path in out
    assert not (tmp_path / "data").exists()


def test_a_real_run_still_refuses_a_key_that_is_not_there(tmp_path):
    rc, out = run(tmp_path)
    assert rc != 0 and "[E_TOOLKIT] localhost: the repository key file://" in out
