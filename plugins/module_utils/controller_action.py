# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The module half of a controller action: its options, for documentation and sanity checks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule


def refuse_on_host(name, argument_spec):
    """A controller action's module file run on a host: check the options, then say where it runs."""
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    module.fail_json(msg="glm53.tensorfold.%s runs on the controller as an action plugin" % name)
