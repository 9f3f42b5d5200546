# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attributes of an action that judges on the controller what other tasks gathered.
    DOCUMENTATION = r"""
attributes:
  action:
    description: Runs entirely on the controller; nothing is sent to the host.
    support: full
  check_mode:
    description: Only reads what it is given, so check mode gives the same answer.
    support: full
  diff_mode:
    description: Returns no diff (nothing changes).
    support: none
"""
