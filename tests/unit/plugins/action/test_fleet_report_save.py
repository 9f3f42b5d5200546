# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""fleet_report_save writes the report's files on the controller: the folder made, each file 0644,
the same content left alone."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.action.fleet_report_save import save


def test_the_folder_is_made_and_each_file_written_once(tmp_path):
    folder = str(tmp_path / "reports" / "fleet")
    files = [{"name": "fleet-report.md", "content": "# Fleet\n"}, {"name": "fleet-report.json", "content": "{}\n"}]
    assert save(folder, files) == [os.path.join(folder, "fleet-report.md"), os.path.join(folder, "fleet-report.json")]
    assert (tmp_path / "reports" / "fleet" / "fleet-report.md").read_text() == "# Fleet\n"
    assert oct(os.stat(os.path.join(folder, "fleet-report.json")).st_mode & 0o777) == "0o644"
    assert save(folder, files) == []  # the same content: nothing rewritten
    files[1]["content"] = '{"hosts": []}\n'
    assert save(folder, files) == [os.path.join(folder, "fleet-report.json")]
    assert sorted(os.listdir(folder)) == ["fleet-report.json", "fleet-report.md"]  # no temporary file left
