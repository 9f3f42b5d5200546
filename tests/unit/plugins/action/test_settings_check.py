# -*- coding: utf-8 -*-
"""The settings fingerprint settings_check publishes: the same settings give the same hash, any
setting that shapes the deploy changes it, a no_log setting and the step guard's options do not."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from types import SimpleNamespace

import pytest

from ansible.parsing.vault import AnsibleVaultError
from ansible.errors import AnsibleActionFail
from ansible.playbook.play_context import PlayContext

from ansible_collections.glm53.tensorfold.plugins.action.settings_check import settings_fingerprint

SPEC = {"tensorfold_port": {"type": "int"}, "tensorfold_api_key": {"type": "str", "no_log": True},
        "tensorfold_kv": {"type": "str"}, "step_name": {"type": "str"}}
VALUES = {"tensorfold_port": 8020, "tensorfold_api_key": "sk-one", "tensorfold_kv": "fp8", "step_name": "pre-flight"}


def test_same_settings_same_fingerprint():
    assert settings_fingerprint(SPEC, dict(VALUES)) == settings_fingerprint(SPEC, dict(VALUES))
    assert len(settings_fingerprint(SPEC, VALUES)) == 64


def test_a_setting_that_shapes_the_deploy_changes_it():
    assert settings_fingerprint(SPEC, dict(VALUES, tensorfold_port=8021)) != settings_fingerprint(SPEC, VALUES)
    unset = dict(VALUES)
    del unset["tensorfold_kv"]
    assert settings_fingerprint(SPEC, unset) != settings_fingerprint(SPEC, VALUES)


def test_secrets_and_the_step_options_leave_it_alone():
    assert settings_fingerprint(SPEC, dict(VALUES, tensorfold_api_key="sk-two")) == settings_fingerprint(SPEC, VALUES)
    assert settings_fingerprint(SPEC, dict(VALUES, step_name="plan")) == settings_fingerprint(SPEC, VALUES)


def test_how_a_run_is_rolled_out_or_reported_leaves_it_alone():
    spec = dict(SPEC, tensorfold_serial={"type": "raw"}, fleet_report_dir={"type": "path"}, tensorfold_context={"type": "int"})
    values = dict(VALUES, tensorfold_context=131072)
    for name, value in (("tensorfold_serial", 1), ("tensorfold_serial", "25%"), ("fleet_report_dir", "/tmp/reports")):
        assert settings_fingerprint(spec, dict(values, **{name: value})) == settings_fingerprint(spec, values)
    assert settings_fingerprint(spec, dict(values, tensorfold_context=65536)) != settings_fingerprint(spec, values)


def test_every_run_only_setting_is_a_setting_of_the_collection():
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import _role_specs
    from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec
    assert sorted(settings_spec.RUN_ONLY - set(settings_spec.merge_specs(_role_specs()))) == []


def test_a_fingerprint_kept_by_a_fact_cache_is_not_taken_for_this_runs():
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import ActionModule
    task = SimpleNamespace(action="glm53.tensorfold.settings_check", async_val=0, check_mode=False, args={})
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    plugin = ActionModule(task, connection, PlayContext(), loader=None, templar=templar, shared_loader_obj=None)
    result = plugin.run(task_vars={"inventory_hostname": "gpu-a", "tensorfold_settings_fingerprint": "0" * 64})
    assert len(result["fingerprint"]) == 64 and result["fingerprint"] != "0" * 64
    assert result["hosts"]["gpu-a"]["fingerprint"] == result["fingerprint"]
    assert "ansible_facts" not in result  # never a fact, which a fact cache would keep


def test_settings_of_other_hosts_leave_a_boxs_fingerprint_alone():
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import _role_specs
    from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec
    role_specs = _role_specs()
    spec = settings_spec.merge_specs(role_specs)
    elsewhere = settings_spec.other_hosts_settings(role_specs)
    values = {"tensorfold_port": 8020, "gateway_drain_timeout": 60, "monitoring_scrape_interval": "15s",
              "fleet_bench_cases": [], "monitoring_textfile_dir": "/var/lib/prometheus/node-exporter",
              "monitoring_node_exporter_port": 9100}
    base = settings_fingerprint(spec, values, elsewhere)
    for name, value in (("gateway_drain_timeout", 20), ("monitoring_scrape_interval", "30s"),
                        ("fleet_bench_cases", [{"name": "short"}]), ("gateway_port", 8080)):
        assert settings_fingerprint(spec, dict(values, **{name: value}), elsewhere) == base, name
    # What the node exporter on each box serves is the box's.
    for name, value in (("monitoring_textfile_dir", "/srv/textfile"), ("monitoring_node_exporter_port", 9200),
                        ("monitoring_node_exporter", False), ("tensorfold_port", 8021)):
        assert settings_fingerprint(spec, dict(values, **{name: value}), elsewhere) != base, name


def test_the_box_side_settings_of_other_roles_are_settings_of_the_collection():
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import _role_specs
    from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec
    role_specs = _role_specs()
    assert sorted(settings_spec.BOX_SIDE - set(settings_spec.merge_specs(role_specs))) == []
    assert "gateway_backend_name" in settings_spec.other_hosts_settings(role_specs)
    assert not settings_spec.BOX_SIDE & settings_spec.other_hosts_settings(role_specs)


def _run(task_vars, template=lambda value: value):
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import ActionModule
    task = SimpleNamespace(action="glm53.tensorfold.settings_check", async_val=0, check_mode=False, args={})
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    plugin = ActionModule(task, connection, PlayContext(), loader=None, templar=SimpleNamespace(template=template),
                          shared_loader_obj=None)
    plugin._play_keyword_values = lambda: {}
    return plugin.run(task_vars=dict(task_vars, inventory_hostname="gpu-a"))


def _failing_template(value):
    from ansible.errors import AnsibleUndefinedVariable
    if value == "{{ undefined }}":
        raise AnsibleUndefinedVariable("'undefined' is undefined")
    if value == "{{ ansible_default_ipv4.address }}":
        raise AnsibleUndefinedVariable("'ansible_default_ipv4' is undefined")
    return value


def test_a_setting_whose_template_fails_is_an_e_settings_problem():
    result = _run({"tensorfold_port": "{{ undefined }}", "tensorfold_host": "{{ ansible_default_ipv4.address }}"},
                  _failing_template)
    assert result["failed"] is True
    # A host fact too: no play gathers facts before the host checks read the settings.
    assert sorted(p["setting"] for p in result["problems"]) == ["tensorfold_host", "tensorfold_port"]
    assert any("tensorfold_port could not be templated ('undefined' is undefined)" in text for text in result["msg"])


def test_a_misspelled_setting_warns_and_the_right_ones_do_not():
    result = _run({"tensorfold_contxt": 4096, "tensorfold_context": 4096, "tensorfold_settings_checked": {},
                   "tensorfold_settings_fingerprint": "0" * 64})
    assert not result.get("failed")
    assert result["warnings"] == [
        "[W_SETTINGS] gpu-a: tensorfold_contxt is not a setting of glm53.tensorfold. Did you mean tensorfold_context? "
        "Rename it; as it is, nothing reads it and the default applies."]


def test_a_misspelling_is_named_for_the_host_that_has_it_or_once_for_the_inventory():
    per_host = {"gpu-a": {"tensorfold_contxt": 4096}, "gpu-b": {"tensorfold_contxt": 4096, "tensorfold_image_strategy": "once"},
                "gpu-c": {"tensorfold_contxt": 4096}}
    result, unused = _batch(per_host, hosts=["gpu-a", "gpu-b", "gpu-c"])
    assert [text.split(" is ")[0] for text in result["warnings"]] == [
        "[W_SETTINGS] inventory: tensorfold_contxt", "[W_SETTINGS] gpu-b: tensorfold_image_strategy"]


def _run_on(host, task_vars, groups):
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import ActionModule
    task = SimpleNamespace(action="glm53.tensorfold.settings_check", async_val=0, check_mode=False, args={})
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    plugin = ActionModule(task, connection, PlayContext(), loader=None, templar=SimpleNamespace(template=lambda value: value),
                          shared_loader_obj=None)
    plugin._play_keyword_values = lambda: {}
    return plugin.run(task_vars=dict(task_vars, inventory_hostname=host, groups=groups))


def test_pre_flight_reads_the_inventory_and_the_roles_defaults_for_the_rules_on_hosts():
    groups = {"all": ["gw", "gpu-a"], "gpu_hosts": ["gw", "gpu-a"], "gateways": ["gw"], "ungrouped": []}
    # A gateway host that is also a box, every port at its default: HAProxy and the engine both want 8020.
    result = _run_on("gw", {}, groups)
    assert result["failed"] is True and [p["setting"] for p in result["problems"]] == ["gateway_port"]
    assert _run_on("gw", {"gateway_port": 8080}, groups).get("failed") is None
    # The timing rule holds a raised timeout against the default interval.
    result = _run_on("gw", {"gateway_port": 8080, "gateway_check_timeout": 3}, groups)
    assert [p["setting"] for p in result["problems"]] == ["gateway_check_timeout"]
    # The same settings on a box that is no gateway are not its business.
    assert _run_on("gpu-a", {"gateway_check_timeout": 3}, groups).get("failed") is None
    result = _run_on("gpu-a", {"tensorfold_image_build_host": "gpu-z"}, groups)
    assert [p["setting"] for p in result["problems"]] == ["tensorfold_image_build_host"]
    assert _run_on("gpu-a", {"tensorfold_image_build_host": "gw"}, groups).get("failed") is None


def run_check(args, task_vars):
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import ActionModule
    task = SimpleNamespace(action="glm53.tensorfold.settings_check", async_val=0, check_mode=False, args=args)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value)
    plugin = ActionModule(task, connection, PlayContext(), loader=None, templar=templar, shared_loader_obj=None)
    return plugin.run(task_vars=dict(task_vars, inventory_hostname="gpu-a"))


def test_the_image_settings_only_when_asked_and_each_setting_named_once():
    # The pins' defaults are empty: a run that builds the image must have them.
    assert run_check({}, {})["problems"] == []
    assert run_check({"image": "ignore"}, {})["problems"] == []
    found = run_check({"image": "also"}, {})
    assert found["failed"] and [entry["setting"] for entry in found["problems"]] == [
        "tensorfold_image_engine_commit", "tensorfold_image_patch_series_repo"]
    pinned = {"tensorfold_image_engine_commit": "f" * 40, "tensorfold_image_patch_series_commit": "e" * 40}
    assert run_check({"image": "also"}, pinned)["problems"] == []
    # A port refused by its type is not refused a second time by the image's rules.
    found = run_check({"image": "also"}, dict(pinned, tensorfold_image_move_port="x"))
    assert [entry["setting"] for entry in found["problems"]] == ["tensorfold_image_move_port"]


def test_the_image_role_checks_its_settings_alone_and_keeps_the_runs_fingerprint():
    # A bad value of another setting is the first check's business; the image's pins are this one's.
    other = {"tensorfold_port": "not a port", "tensorfold_image_engine_commit": "f350cd3e"}
    found = run_check({"image": "only"}, other)
    assert [entry["setting"] for entry in found["problems"]] == [
        "tensorfold_image_engine_commit", "tensorfold_image_patch_series_repo"] and found["failed"]
    assert "ansible_facts" not in found and "fingerprint" not in found
    pinned = {"tensorfold_image_engine_commit": "f" * 40, "tensorfold_image_patch_series_commit": "e" * 40}
    found = run_check({"image": "only"}, dict(pinned, tensorfold_port="not a port"))
    assert found["problems"] == [] and not found.get("failed") and "ansible_facts" not in found
    # The option's choices are the module's own (its ARGUMENT_SPEC), checked before anything is read.
    with pytest.raises(AnsibleActionFail, match="image"):
        run_check({"image": "sometimes"}, {})


class _Manager:
    """Stands for Ansible's variable manager: each host's variables for the task."""

    def __init__(self, per_host):
        self.per_host, self.asked = per_host, []

    def get_vars(self, play, host, task):
        self.asked.append(host.name)
        return dict(self.per_host[host.name], inventory_hostname=host.name)


def _batch(per_host, **args):
    from ansible_collections.glm53.tensorfold.plugins.action.settings_check import ActionModule
    manager = _Manager(per_host)
    hostvars = SimpleNamespace(_variable_manager=manager,
                               _inventory=SimpleNamespace(get_host=lambda name: SimpleNamespace(name=name) if name in per_host else None))
    task = SimpleNamespace(action="glm53.tensorfold.settings_check", async_val=0, check_mode=False, args=args,
                           get_play=lambda: None)
    connection = SimpleNamespace(_shell=SimpleNamespace(tmpdir=None))
    templar = SimpleNamespace(template=lambda value: value, copy_with_new_env=lambda available_variables: templar)
    plugin = ActionModule(task, connection, PlayContext(), loader=None, templar=templar, shared_loader_obj=None)
    plugin._play_keyword_values = lambda: {}
    # The running host's own variables come with the task; the others' from the variable manager.
    own = dict(per_host["gpu-a"], inventory_hostname="gpu-a", hostvars=hostvars)
    return plugin.run(task_vars=own), manager


def test_one_check_for_the_batch_answers_each_host_with_its_own_settings_and_fails_none():
    per_host = {"gpu-a": {"tensorfold_port": 8020}, "gpu-b": {"tensorfold_parallel": 0}, "gpu-c": {"tensorfold_port": 8021}}
    result, manager = _batch(per_host, hosts=["gpu-a", "gpu-b", "gpu-c"])
    assert manager.asked == ["gpu-b", "gpu-c"]  # the running host's own task variables are not asked again
    assert not result.get("failed")  # a run_once task that failed would fail every host of the batch
    assert [entry["host"] for entry in result["failed_hosts"]] == ["gpu-b"]
    assert result["failed_hosts"][0]["message"][0].startswith("[E_SETTINGS] gpu-b: tensorfold_parallel is 0.")
    assert result["hosts"]["gpu-a"]["problems"] == [] and result["hosts"]["gpu-c"]["problems"] == []
    fingerprints = dict((name, answer["fingerprint"]) for name, answer in result["hosts"].items())
    assert fingerprints["gpu-a"] != fingerprints["gpu-c"]  # each host's own port
    assert "fingerprint" not in result  # no single host's answer at the top


def test_a_host_checked_in_a_batch_gets_the_fingerprint_it_gets_checked_alone():
    per_host = {"gpu-a": {"tensorfold_port": 8020}, "gpu-b": {"tensorfold_port": 8021, "tensorfold_context": 65536}}
    batch, unused = _batch(per_host, hosts=["gpu-a", "gpu-b"])
    alone = _run(per_host["gpu-b"])  # checked as gpu-a, whose name the fingerprint leaves out
    assert batch["hosts"]["gpu-b"]["fingerprint"] == alone["fingerprint"]


def test_the_image_rules_apply_to_the_hosts_named_for_them_only():
    per_host = {"gpu-a": {"tensorfold_image_engine_commit": "f350cd3e"}, "gpu-b": {"tensorfold_image_engine_commit": "f350cd3e"}}
    result, unused = _batch(per_host, hosts=["gpu-a", "gpu-b"], image_hosts=["gpu-b"])
    assert [entry["host"] for entry in result["failed_hosts"]] == ["gpu-b"]
    assert "tensorfold_image_engine_commit" in result["failed_hosts"][0]["message"][0]


class UndecryptableVaultError(Exception):
    """Stands for ansible-core 2.19's private error of an undecryptable vaulted variable."""


@pytest.mark.parametrize("cause", [UndecryptableVaultError("Attempt to use undecryptable variable."),
                                   AnsibleVaultError("no vault secrets")])
def test_a_vaulted_setting_without_its_password_says_to_give_the_password(cause):
    from ansible.errors import AnsibleTemplateError

    def template(value):
        if value == "sealed":
            raise AnsibleTemplateError("Object messages can't be templated") from cause
        return value

    result = _run({"tensorfold_api_key": "sealed"}, template)
    assert [p["setting"] for p in result["problems"]] == ["tensorfold_api_key"]
    assert "tensorfold_api_key is vaulted, and no vault password given could decrypt it" in result["msg"][0]
    assert "--vault-password-file" in result["msg"][0] and "could not be templated" not in result["msg"][0]


def test_a_value_counts_in_the_fingerprint_as_its_type_reads_it():
    spec = dict(SPEC, tensorfold_vision={"type": "bool"}, tensorfold_context={"type": "raw"},
                tensorfold_memory_reserve_gib={"type": "float"})
    typed = dict(VALUES, tensorfold_vision=True, tensorfold_context=65536, tensorfold_memory_reserve_gib=3.5)
    as_text = dict(VALUES, tensorfold_port="8020", tensorfold_vision="true", tensorfold_context="65536",
                   tensorfold_memory_reserve_gib="3.5")
    assert settings_fingerprint(spec, as_text) == settings_fingerprint(spec, typed)
    assert settings_fingerprint(spec, dict(typed, tensorfold_vision="yes")) == settings_fingerprint(spec, typed)
    assert settings_fingerprint(spec, dict(typed, tensorfold_vision="false")) != settings_fingerprint(spec, typed)


def test_values_already_typed_keep_the_fingerprint_a_converged_box_recorded():
    from ansible_collections.glm53.tensorfold.plugins.module_utils import settings_spec
    spec = dict(SPEC, tensorfold_vision={"type": "bool"}, tensorfold_context={"type": "raw"},
                tensorfold_memory_reserve_gib={"type": "float"}, tensorfold_gpus={"type": "list", "elements": "int"})
    typed = dict(VALUES, tensorfold_vision=False, tensorfold_context="auto", tensorfold_memory_reserve_gib=4,
                 tensorfold_gpus=[0, 1])
    assert settings_spec.normalised(spec, typed) == typed
    assert [type(value) for value in settings_spec.normalised(spec, typed).values()] == [type(value) for value in typed.values()]


def test_a_patch_folder_counts_by_its_patches_not_by_where_it_is(tmp_path):
    # Two operators' checkouts, or one moved: the same patches in another place keep every box's
    # fingerprint (a changed one would redeploy the fleet); an edited or added patch changes it.
    spec = dict(SPEC, tensorfold_image_site_patches_dir={"type": "str"}, tensorfold_image_patch_series_dir={"type": "str"},
                tensorfold_image_controller_cache={"type": "str"})
    for place in ("alice", "bob"):
        (tmp_path / place).mkdir()
        (tmp_path / place / "0001-site.patch").write_text("--- a\n+++ b\n")
        (tmp_path / place / "README.md").write_text("notes on the patches of %s\n" % place)

    def fingerprint(place, **more):
        return settings_fingerprint(spec, dict(VALUES, tensorfold_image_site_patches_dir=str(tmp_path / place),
                                               tensorfold_image_controller_cache="/home/%s/.cache/glm53-tensorfold" % place,
                                               **more))
    assert fingerprint("alice") == fingerprint("bob")
    (tmp_path / "bob" / "0001-site.patch").write_text("--- a\n+++ b\n@@ edited\n")
    assert fingerprint("alice") != fingerprint("bob")
    (tmp_path / "alice" / "0002-more.patch").write_text("--- c\n+++ d\n")
    assert fingerprint("alice") != settings_fingerprint(spec, dict(VALUES, tensorfold_image_site_patches_dir=str(tmp_path / "bob")))
    # The recipe's series in a folder of the site's own counts the same way.
    assert fingerprint("alice", tensorfold_image_patch_series_dir=str(tmp_path / "alice")) == \
        fingerprint("alice", tensorfold_image_patch_series_dir=str(tmp_path / "alice") + "/")
    assert fingerprint("alice", tensorfold_image_patch_series_dir=str(tmp_path / "alice")) != \
        fingerprint("alice", tensorfold_image_patch_series_dir=str(tmp_path / "bob"))


def test_the_collections_own_patch_folder_counts_where_no_setting_names_one(tmp_path, monkeypatch):
    from ansible_collections.glm53.tensorfold.plugins.action import settings_check
    (tmp_path / "0001-site.patch").write_text("--- a\n+++ b\n")
    monkeypatch.setattr(settings_check, "SITE_PATCHES", str(tmp_path))
    before = settings_fingerprint(SPEC, VALUES)
    (tmp_path / "0001-site.patch").write_text("--- a\n+++ b\n@@ edited\n")
    assert settings_fingerprint(SPEC, VALUES) != before
