# -*- coding: utf-8 -*-
"""The codes' filters, the Jinja doors onto codes.problem/record: the text first, then the code and
the host, the code's advice unless another is given."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.filter.problem import FilterModule
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import CODES

FILTERS = FilterModule().filters()


def test_problem_formats_the_text_with_the_codes_advice():
    text = FILTERS["problem"]("the hosts compute different image tags", "E_SETTINGS", "gpu-a")
    assert text == "[E_SETTINGS] gpu-a: the hosts compute different image tags. " + CODES["E_SETTINGS"][1]


def test_problem_takes_a_given_advice_instead():
    assert FILTERS["problem"]("port 8020 is taken!", "E_PORT", "gpu-b", "Free it.") == "[E_PORT] gpu-b: port 8020 is taken! Free it."


def test_problem_record_carries_code_severity_host_and_the_same_message():
    got = FILTERS["problem_record"]("peer-to-peer is off", "W_P2P", "gpu-c")
    assert got["code"] == "W_P2P" and got["host"] == "gpu-c" and got["severity"] == CODES["W_P2P"][0]
    assert got["message"] == FILTERS["problem"]("peer-to-peer is off", "W_P2P", "gpu-c")
