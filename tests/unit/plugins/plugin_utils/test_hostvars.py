# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleUndefinedVariable

from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published

HOSTVARS = {"gpu1": {"gpu_host_checks_result": {"status": "pass", "problems": []}, "tensorfold_image_tag": "abc"}}


class Resolver(object):
    """ansible-core 2.19's Templar.resolve_variable_expression over a plain hostvars dict."""

    def resolve_variable_expression(self, expression, local_variables=None):
        assert expression == "hostvars[host][name]"
        try:
            return HOSTVARS[local_variables["host"]][local_variables["name"]]
        except KeyError:
            raise AnsibleUndefinedVariable("undefined")


class OldTemplar(object):
    """An older Templar: hostvars come from task_vars and each value is templated."""

    def template(self, value):
        return value


def test_only_the_names_a_host_has_are_returned():
    assert published(Resolver(), {}, "gpu1", ["gpu_host_checks_result", "smoke_test_result"]) == {
        "gpu_host_checks_result": {"status": "pass", "problems": []}}


def test_an_unknown_host_has_nothing():
    assert published(Resolver(), {}, "gpu9", ["gpu_host_checks_result"]) == {}


def test_before_2_19_the_task_vars_hostvars_are_read():
    assert published(OldTemplar(), {"hostvars": HOSTVARS}, "gpu1", ["tensorfold_image_tag", "x"]) == {"tensorfold_image_tag": "abc"}
    assert published(OldTemplar(), {"hostvars": HOSTVARS}, "gpu9", ["tensorfold_image_tag"]) == {}
