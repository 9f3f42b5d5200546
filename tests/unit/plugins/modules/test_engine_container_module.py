# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""engine_container on a host without the docker command: coded in a real run, a plan in check mode."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils import basic

from ansible_collections.glm53.tensorfold.plugins.modules import engine_container


def args(tmp_path, **changes):
    given = {"host": "h1", "name": "glm53-zig", "label": "glm53.tensorfold.rank_container", "image": "img:tag",
             "settings": {"tensorfold_parallel": "4", "tensorfold_port": 8020}, "context": "auto",
             "auto_context": 1048576, "fit_fields": {"gpu_name": "card"}, "page_rows": 512, "parallel": "4",
             "data_dir": str(tmp_path), "model_dir": str(tmp_path / "model"), "cache_dir": str(tmp_path / ".cache"),
             "gpu_indices": [0, 1], "gpu_requests": False, "state": "started"}
    given.update(changes)
    return given


def test_a_host_without_docker_fails_coded_before_anything_changes(monkeypatch, run_module, tmp_path):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: None)
    result = run_module(engine_container, **args(tmp_path))
    assert result.get("failed") and result["code"] == "E_DOCKER"
    assert result["msg"].startswith("[E_DOCKER] h1: the docker command is not on this host.")
    assert not (tmp_path / ".state").exists()


def test_check_mode_on_a_host_without_docker_says_it_would_start(monkeypatch, run_module, tmp_path):
    ran = []
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, **kw: None)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: ran.append(argv) or (0, "", ""))
    result = run_module(engine_container, _ansible_check_mode=True, **args(tmp_path))
    assert not result.get("failed"), result
    assert result["result"]["status"] == "would_start" and result["changed"]
    assert ran == []  # no command is tried where there is none
