# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filters for the engine image: the patch series checks, the series hash and the image tag."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem, record
from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import (
    build_failure,
    image_tag,
    series_hash,
    series_problems,
)


def _patch_series_problems(entries, host, expected_count=None):
    if expected_count in ("", None):
        expected_count = None
    return [record("E_PATCHES", host, what) for what in series_problems(entries, expected_count)]


def _patch_series_hash(entries):
    return series_hash(entries)


def _image_build_problem(log, host, engine_commit=""):
    failure = build_failure(log, engine_commit)
    return problem(failure["code"], host, failure["what"])


def _image_tag(dockerfile_text, entries, pins):
    return image_tag(dockerfile_text, entries, pins)


class FilterModule(object):
    """The engine image's content hash and patch series checks."""

    def filters(self):
        return {
            "patch_series_problems": _patch_series_problems,
            "patch_series_hash": _patch_series_hash,
            "image_tag": _image_tag,
            "image_build_problem": _image_build_problem,
        }
