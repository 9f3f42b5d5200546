# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: the coded problem of a failed engine image build, from BuildKit's output."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem
from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import build_failure


def _image_build_problem(log, host, engine_commit=""):
    failure = build_failure(log, engine_commit)
    return problem(failure["code"], host, failure["what"])


class FilterModule(object):
    """The engine image's build failures."""

    def filters(self):
        return {"image_build_problem": _image_build_problem}
