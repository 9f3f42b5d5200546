# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: the files pip download reported (the bundle keeps only these in python/wheels)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


from ansible_collections.glm53.tensorfold.plugins.module_utils.bundle import pip_download_files


class FilterModule(object):
    """pip's output read."""

    def filters(self):
        return {"pip_download_files": pip_download_files}
