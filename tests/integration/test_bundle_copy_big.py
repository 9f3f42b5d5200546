# -*- coding: utf-8 -*-
"""roles/bundle/tasks/copy_big.yml, the copies of tens of GB from the bundle (image archive,
weight shards): they are staged beside their destination, never in the SSH user's remote_tmp
(its home), which here cannot even be made."""

import os
import sys

from ansible_run import ROOT, run_playbook

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: A plain copy (staged in remote_tmp)
      ansible.builtin.copy: {src: "{{ work }}/src/image.tar", dest: "{{ work }}/plain.tar", mode: "0644"}
      register: plain
      ignore_errors: true
      ignore_unreachable: true
    - name: The bundle's copy of a file, then of a folder
      ansible.builtin.include_tasks: "{{ tasks }}/copy_big.yml"
      vars:
        bundle_copy_src: "{{ work }}/src/{{ item.src }}"
        bundle_copy_dest: "{{ work }}/dest/{{ item.dest }}"
        bundle_copy_tmp: "{{ work }}/dest/.tmp"
        bundle_copy_mode: "0444"
      loop: [{src: image.tar, dest: image.tar}, {src: files/, dest: model/}]
    - ansible.builtin.debug:
        msg: "plain copy failed: {{ plain is failed or plain is unreachable }}"
"""


def test_a_big_copy_needs_no_room_in_remote_tmp(tmp_path):
    (tmp_path / "src" / "files" / "sub").mkdir(parents=True)
    (tmp_path / "src" / "image.tar").write_bytes(b"i" * (1 << 20))
    (tmp_path / "src" / "files" / "sub" / "model.safetensors").write_bytes(b"w" * 4096)
    (tmp_path / "dest").mkdir()
    (tmp_path / "home-is-a-file").write_text("")
    (tmp_path / "play.yml").write_text(PLAY)
    rc, out = run_playbook(
        tmp_path / "play.yml", "localhost,", tmp_path,
        extra_args=["-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable, "-e", "work=%s" % tmp_path, "-e", "tasks=%s/roles/bundle/tasks" % ROOT],
        env={"ANSIBLE_REMOTE_TMP": str(tmp_path / "home-is-a-file" / "tmp"), "ANSIBLE_PIPELINING": "1"})
    assert rc == 0, out[-3000:]
    assert "plain copy failed: True" in out  # what the bundle's copies did before
    assert (tmp_path / "dest" / "image.tar").stat().st_size == 1 << 20
    assert (tmp_path / "dest" / "model" / "sub" / "model.safetensors").read_bytes() == b"w" * 4096
    assert sorted(os.listdir(str(tmp_path / "dest"))) == ["image.tar", "model"]  # the staging folder is gone
