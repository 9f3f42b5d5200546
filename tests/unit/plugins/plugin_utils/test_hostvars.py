# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleUndefinedVariable
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

from ansible_collections.glm53.tensorfold.plugins.plugin_utils.hostvars import published

LIVE = {"status": "live", "endpoint": "http://gpu2:8020/v1", "problems": []}
HOSTVARS = {"gpu1": {"gpu_host_checks_result": {"status": "pass", "problems": []}, "tensorfold_image_tag": "abc"},
            # converged: the fast path's answer stands for the facts of the steps it skipped (its
            # one read of the batch is registered on every host, each box's answer under "boxes")
            "gpu2": {"tensorfold_image_tag": "new", "step_converged_info": {"boxes": {
                "gpu2": {"converged": True, "published": {"smoke_test_result": LIVE, "tensorfold_image_tag": "old"}},
                "gpu3": {"converged": False, "published": None}}}},
            # not converged: nothing stands for the steps' facts (another box's answer is not its own)
            "gpu3": {"step_converged_info": {"boxes": {
                "gpu2": {"converged": True, "published": {"smoke_test_result": LIVE}},
                "gpu3": {"converged": False, "published": None}}}},
            # one variable that does not template hides no other
            "gpu4": {"broken": "{{ undefined }}", "tensorfold_image_tag": "abc"},
            # inject_facts_as_vars off: a module's fact only under ansible_facts
            "gpu5": {"ansible_facts": {"gpu_host_checks_gpus": [{"index": 0}]}, "tensorfold_image_tag": "abc"}}


class Resolver(object):
    """ansible-core 2.19's Templar.resolve_variable_expression, over one host's variables."""

    def resolve_variable_expression(self, expression, local_variables=None):
        if expression != "host_vars[name]":  # the fast path's answer of the box itself: the real templar
            return Templar(loader=DataLoader()).resolve_variable_expression(expression, local_variables=local_variables)
        value = local_variables["host_vars"][local_variables["name"]]
        if value == "{{ undefined }}":
            raise AnsibleUndefinedVariable("undefined")
        return value


class CountingHostVars(dict):
    """task_vars' hostvars: each host's variables computed when asked for (counted)."""

    def __init__(self, *args):
        dict.__init__(self, *args)
        self.reads = []

    def __getitem__(self, host):
        self.reads.append(host)
        return dict.__getitem__(self, host)


class OldTemplar(object):
    """An older Templar: hostvars come from task_vars and each value is templated."""

    def template(self, value):
        return value


def test_only_the_names_a_host_has_are_returned():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu1", ["gpu_host_checks_result", "smoke_test_result"]) == {
        "gpu_host_checks_result": {"status": "pass", "problems": []}}


def test_an_unknown_host_has_nothing():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu9", ["gpu_host_checks_result"]) == {}


def test_before_2_19_the_task_vars_hostvars_are_read():
    assert published(OldTemplar(), {"hostvars": HOSTVARS}, "gpu1", ["tensorfold_image_tag", "x"]) == {"tensorfold_image_tag": "abc"}
    assert published(OldTemplar(), {"hostvars": HOSTVARS}, "gpu9", ["tensorfold_image_tag"]) == {}


def test_a_converged_box_stands_for_the_facts_of_the_steps_it_skipped():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu2", ["smoke_test_result", "rank_container_result"]) == {"smoke_test_result": LIVE}


def test_a_fact_a_step_of_this_run_set_wins_over_what_the_box_stands_for():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu2", ["tensorfold_image_tag"]) == {"tensorfold_image_tag": "new"}


def test_a_box_that_differs_stands_for_nothing():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu3", ["smoke_test_result"]) == {}


def test_a_hosts_variables_are_computed_once_for_all_the_names():
    hostvars = CountingHostVars(HOSTVARS)
    published(Resolver(), {"hostvars": hostvars}, "gpu2", ["smoke_test_result", "tensorfold_image_tag", "rank_container_result", "x"])
    assert hostvars.reads == ["gpu2"]


def test_a_variable_that_does_not_template_hides_no_other():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu4", ["broken", "tensorfold_image_tag"]) == {
        "tensorfold_image_tag": "abc"}


def test_a_fact_is_found_under_ansible_facts_when_facts_are_not_variables_of_their_own():
    assert published(Resolver(), {"hostvars": HOSTVARS}, "gpu5", ["gpu_host_checks_gpus", "tensorfold_image_tag", "x"]) == {
        "gpu_host_checks_gpus": [{"index": 0}], "tensorfold_image_tag": "abc"}
    assert published(OldTemplar(), {"hostvars": HOSTVARS}, "gpu5", ["gpu_host_checks_gpus"]) == {"gpu_host_checks_gpus": [{"index": 0}]}
