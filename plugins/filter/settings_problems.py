# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: the first pre-flight tier's checks on the recipe's settings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.glm53.tensorfold.plugins.module_utils.settings import check_settings


def settings_problems(settings, host):
    return check_settings(dict(settings or {}), host)


class FilterModule(object):
    """Settings checks."""

    def filters(self):
        return {"settings_problems": settings_problems}
