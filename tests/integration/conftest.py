# -*- coding: utf-8 -*-
"""Playbook runs on this controller: the helpers they share are importable by name
(tests/python/ansible_run.py, tests/standins/hub/emulator_process.py)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for folder in (os.path.join(ROOT, "tests", "python"), os.path.join(ROOT, "tests", "standins", "hub")):
    if folder not in sys.path:
        sys.path.insert(0, folder)
