# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Following a background job from the run: when it has finished, and when to print a line.

A download may take hours. The run follows it with one task whose output is bounded however long
the job lasts: a progress line only when the whole percentage grows (at most 101 lines), and a
heartbeat the job watches so that it stops once the run that follows it is gone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def job_finished(text):
    """True when an Ansible async job's results file holds the module's final result.

    While the job runs the file reads ``{"started": 1, "finished": 0, ...}``; once the module
    ended it holds the module's result (no ``started``), or a failure of the wrapper.
    """
    try:
        data = json.loads(text or "")
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    return "started" not in data or bool(data.get("finished"))


def percent(progress):
    """The whole percentage done of a progress record (``done``/``total``), 0 to 100."""
    total = int(progress.get("total") or 0)
    done = int(progress.get("done") or 0)
    if total <= 0:
        return 100 if progress.get("finished") else 0
    return max(0, min(100, done * 100 // total))


def line_due(last_printed, current):
    """Print a progress line only when the whole percentage grew: at most 101 lines per job."""
    return last_printed is None or current > last_printed
