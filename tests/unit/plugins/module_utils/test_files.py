# -*- coding: utf-8 -*-
"""write_if_changed: the folder made, the file written atomically with its mode, the same text left alone."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.glm53.tensorfold.plugins.module_utils.files import write_if_changed


def test_written_once_then_left_alone_until_the_text_changes(tmp_path):
    path = str(tmp_path / "logs" / "current" / "smoke.json")
    assert write_if_changed(path, "{}\n") is True
    assert open(path).read() == "{}\n" and os.stat(path).st_mode & 0o777 == 0o644
    before = os.stat(path).st_mtime_ns
    assert write_if_changed(path, "{}\n") is False and os.stat(path).st_mtime_ns == before
    assert write_if_changed(path, '{"a": 1}\n') is True and open(path).read() == '{"a": 1}\n'
    assert os.listdir(os.path.dirname(path)) == ["smoke.json"]
