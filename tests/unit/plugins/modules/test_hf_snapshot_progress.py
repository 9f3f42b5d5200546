# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""One look of the download's follower on the host: it touches the heartbeat and reads the progress,
also before the download has made its state folder."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.glm53.tensorfold.plugins.modules import hf_snapshot_progress


def params(tmp_path, folder):
    return {"progress_file": str(folder / "model.progress.json"), "heartbeat_file": str(folder / "model.heartbeat"),
            "job_file": None, "wait": 0}


def test_a_look_before_the_download_made_its_folder_touches_nothing_and_goes_on(tmp_path):
    folder = tmp_path / ".state" / "weights"  # not made yet
    answer = hf_snapshot_progress.look(params(tmp_path, folder))
    assert answer == {"finished": False, "percent": answer["percent"], "text": "starting"}
    assert not folder.exists()


def test_a_look_touches_the_heartbeat_and_reads_the_progress(tmp_path):
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "model.progress.json").write_text(json.dumps({"finished": True, "text": "done"}))
    answer = hf_snapshot_progress.look(params(tmp_path, folder))
    assert answer["finished"] is True and answer["text"] == "done"
    assert (folder / "model.heartbeat").exists()


def test_a_look_pauses_briefly_at_first_then_once_a_second(tmp_path, monkeypatch):
    folder = tmp_path / "weights"
    folder.mkdir()
    pauses = []

    def sleep(seconds):
        pauses.append(seconds)
        if len(pauses) == 8:  # the download ends during the eighth pause
            (folder / "model.progress.json").write_text(json.dumps({"finished": True, "text": "done"}))

    monkeypatch.setattr(hf_snapshot_progress.time, "sleep", sleep)
    answer = hf_snapshot_progress.look(dict(params(tmp_path, folder), wait=60))
    assert answer["finished"] is True
    assert pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
