# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The report files the fleet report and the host checks save on the controller: written whole,
into a folder made when missing, never outside it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

import pytest

from ansible_collections.glm53.tensorfold.plugins.plugin_utils.report_files import write_files


def test_writes_every_file_into_a_new_folder(tmp_path):
    folder = str(tmp_path / "reports" / "fleet")
    paths = write_files(folder, [{"name": "a.md", "content": "# one\n"}, {"name": "a.json", "content": "{}\n"}])
    assert paths == [os.path.join(folder, "a.md"), os.path.join(folder, "a.json")]
    assert open(paths[0]).read() == "# one\n"
    assert open(paths[1]).read() == "{}\n"
    assert stat.S_IMODE(os.stat(paths[0]).st_mode) == 0o644
    assert sorted(os.listdir(folder)) == ["a.json", "a.md"]  # no temporary file left behind


def test_replaces_an_older_report(tmp_path):
    write_files(str(tmp_path), [{"name": "r.json", "content": "old"}])
    write_files(str(tmp_path), [{"name": "r.json", "content": "new"}], mode=0o600)
    assert (tmp_path / "r.json").read_text() == "new"
    assert stat.S_IMODE(os.stat(str(tmp_path / "r.json")).st_mode) == 0o600


@pytest.mark.parametrize("name", ["../escape.json", "sub/r.json", "", ".."])
def test_refuses_a_name_outside_the_folder(tmp_path, name):
    with pytest.raises(ValueError):
        write_files(str(tmp_path / "reports"), [{"name": name, "content": "x"}])
    assert not (tmp_path / "escape.json").exists()
