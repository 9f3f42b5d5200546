# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.glm53.tensorfold.plugins.module_utils import follow


def test_a_running_async_job_is_not_finished():
    # What Ansible's async wrapper writes while the module runs.
    assert not follow.job_finished(json.dumps({"started": 1, "finished": 0, "ansible_job_id": "j1"}))
    assert not follow.job_finished("")
    assert not follow.job_finished('{"started": 1, "fin')  # being written


def test_a_module_result_or_a_wrapper_failure_is_finished():
    assert follow.job_finished(json.dumps({"changed": True, "files": []}))
    assert follow.job_finished(json.dumps({"failed": 1, "finished": 1, "msg": "Job reached maximum time limit"}))


def test_percent_is_whole_and_clamped():
    assert follow.percent({"done": 0, "total": 4194676}) == 0
    assert follow.percent({"done": 1048576, "total": 4194676}) == 24
    assert follow.percent({"done": 5, "total": 4}) == 100
    assert follow.percent({}) == 0
    assert follow.percent({"total": 0, "finished": True}) == 100


def test_at_most_one_line_per_whole_percent_so_at_most_101():
    printed, lines = None, 0
    for done in list(range(0, 10 ** 6, 7)) + [10 ** 6]:  # a long download seen at many moments
        current = follow.percent({"done": done, "total": 10 ** 6})
        if follow.line_due(printed, current):
            printed, lines = current, lines + 1
    assert lines == 101
    assert not follow.line_due(40, 40) and not follow.line_due(40, 39) and follow.line_due(40, 41)
