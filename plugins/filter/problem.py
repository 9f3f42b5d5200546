# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters that format problems with the recipe's codes, for roles and templates."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem, record


def _problem(what, code, host, todo=None):
    return problem(code, host, what, todo)


def _problem_record(what, code, host, todo=None):
    return record(code, host, what, todo)


class FilterModule(object):
    """Coded problem messages."""

    def filters(self):
        return {
            "problem": _problem,
            "problem_record": _problem_record,
        }
