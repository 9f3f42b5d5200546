# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: a small generated PNG as a data URL, for the vision smoke request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.glm53.tensorfold.plugins.module_utils.smoke_png import png_data_url


def _png_data_url(size):
    try:
        return png_data_url(size)
    except (TypeError, ValueError) as error:
        raise AnsibleFilterError("png_data_url: %s" % error)


class FilterModule(object):
    """Generated images."""

    def filters(self):
        return {"png_data_url": _png_data_url}
