# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import CODES, problem, record, severity

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "codes.md")


def test_problem_has_the_recipe_shape():
    text = problem("E_PORT", "gpu3", "port 8020 is in use by nginx (pid 77)")
    assert text == "[E_PORT] gpu3: port 8020 is in use by nginx (pid 77). " + CODES["E_PORT"][1]


def test_problem_keeps_given_advice_and_final_stop():
    assert problem("W_P2P", "h", "no peer-to-peer.", "Check ACS.") == "[W_P2P] h: no peer-to-peer. Check ACS."


def test_warnings_and_errors_are_told_apart():
    assert severity("W_P2P") == "warning"
    assert severity("E_GPU_BUSY") == "error"
    assert severity("E_SOMETHING_NEW") == "error"
    assert record("W_POWER", "h", "x")["severity"] == "warning"


def test_every_code_is_documented_and_every_documented_code_exists():
    with open(DOCS) as handle:
        documented = set(re.findall(r"^\| `([EW]_[A-Z0-9_]+)` \|", handle.read(), re.M))
    assert documented == set(CODES)
