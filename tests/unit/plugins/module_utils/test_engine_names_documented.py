# -*- coding: utf-8 -*-
"""The unconfirmed engine names live in one table (engine_args.UNCONFIRMED). The role's page and
the setting's specification repeat the defaults for the operator, so they must name the same."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.glm53.tensorfold.plugins.module_utils import engine_args

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(engine_args.__file__))))


def read(*parts):
    with open(os.path.join(COLLECTION, *parts)) as handle:
        return handle.read()


def test_the_role_page_names_each_default_in_force_and_marks_it_unconfirmed():
    rows = [line for line in read("docs", "rank_container.md").splitlines() if line.startswith("| `tensorfold_")]
    for knob, (name, unused_kind) in engine_args.UNCONFIRMED.items():
        row = [line for line in rows if "`tensorfold_%s`" % knob in line.split(" | ")[0]]
        assert len(row) == 1, "docs/rank_container.md has no single row for tensorfold_%s" % knob
        assert "`%s" % name in row[0] and row[0].rstrip().endswith("**no** |"), row[0]


def test_the_specification_lists_the_defaults_in_force():
    text = read("roles", "tensorfold", "meta", "argument_specs.yml")
    sentence = re.search(r"The defaults \((.*?)\) are unconfirmed", text, re.S)
    assert sentence, "tensorfold_engine_names' description no longer lists the defaults"
    listed = set(re.findall(r"C\(([^)]+)\)", sentence.group(1)))
    assert listed == set(name for name, unused_kind in engine_args.UNCONFIRMED.values())
