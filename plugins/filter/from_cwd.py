# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Filter: a controller path taken from the folder ansible-playbook was started in (the reports
of gpu_host_checks, fleet_bench, monitoring and fleet_report)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def _from_cwd(path):
    """A relative path taken from the directory ansible-playbook was started in.

    Lookups such as pipe run in the playbook's folder, which for an installed collection is
    inside the collection; the controller's own working directory is the operator's.
    """
    path = os.path.expanduser(str(path))
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(os.getcwd(), path))


class FilterModule(object):
    """Controller paths."""

    def filters(self):
        return {"from_cwd": _from_cwd}
