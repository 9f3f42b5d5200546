# -*- coding: utf-8 -*-
"""from_cwd: a relative report path is taken from the folder ansible-playbook was started in, not
the playbook's (inside an installed collection); absolute and ~ paths stay where they point."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.filter.from_cwd import FilterModule

FROM_CWD = FilterModule().filters()["from_cwd"]


def test_a_relative_path_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert FROM_CWD("reports") == os.path.join(str(tmp_path), "reports")
    assert FROM_CWD("reports/../reports/bench/") == os.path.join(str(tmp_path), "reports", "bench")


def test_absolute_and_home_paths_are_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/operator")
    assert FROM_CWD("/srv/reports/") == "/srv/reports"
    assert FROM_CWD("~/reports") == "/home/operator/reports"
