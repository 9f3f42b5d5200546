# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Every role's argument_specs checked the recipe's way: one ``[E_SETTINGS] host: ...`` problem per
bad value, all at once, and no dump of the specification.

Ansible checks a role's ``meta/argument_specs.yml`` when the role starts; a value outside its
``choices`` or of the wrong type then fails with the whole specification printed and no code.
The settings_check role runs before any role's own check, validates the same specifications with
Ansible's own validator, adds the range checks of ``settings.py``, and reports each problem with
its code, naming the setting. The specifications stay the one source of types and choices.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import record
from ansible_collections.glm53.tensorfold.plugins.module_utils.settings import check_settings

_SPEC_KEYS = ("type", "choices", "elements", "options", "no_log")


# Settings that shape how a run goes, never what a box serves: left out of the settings
# fingerprint, so a converged box stays converged when a run is rolled out in other batches,
# reports elsewhere or waits longer. Anything not named here counts (a missed change costs a deploy
# that was not needed; a setting wrongly named here would hide a change).
RUN_ONLY = frozenset((
    "tensorfold_serial", "tensorfold_max_fail_percentage", "tensorfold_restart_serial",
    "tensorfold_restart_max_fail_percentage", "tensorfold_fast_path", "tensorfold_plan", "tensorfold_wait_timeout",
    "fleet_report_dir", "fleet_report_hosts", "fleet_report_keep_history", "fleet_report_slow_ratio",
    "gpu_host_checks_report_dir", "tensorfold_image_show_series", "tensorfold_image_archive_timeout",
    "weights_fetch_progress_interval", "weights_fetch_idle_timeout", "weights_fetch_timeout",
    "smoke_test_timeout",
))

# Roles whose settings shape other hosts (the gateway, the Prometheus host) or a measurement, never a
# GPU box: left out of a box's fingerprint too, so editing them leaves the fleet's boxes on the fast
# path (those hosts compare their own files: service_converged_info). The node exporter's settings
# of the monitoring role do shape each box, so they count.
OTHER_HOSTS_ROLES = ("gateway", "monitoring", "fleet_bench")
BOX_SIDE = frozenset(("monitoring_node_exporter", "monitoring_node_exporter_port", "monitoring_textfile_dir"))

# Read by site.yml's serial keywords, which Ansible works out once per play from the command line's
# and the play's variables, before it reads any host's: a value from the inventory is never used.
PLAY_KEYWORD_SETTINGS = ("tensorfold_serial", "tensorfold_restart_serial")

# The entry points whose options are settings: a role's ``main``, and roles/tensorfold's
# ``settings`` (named so that Ansible does not check its 100+ settings again in every play).
ENTRY_POINTS = ("main", "settings")


def merge_specs(role_specs):
    """One option spec from ``{role: argument_specs dict}`` (each role's ``main`` or ``settings`` entry point)."""
    merged = {}
    for role in sorted(role_specs):
        entries = (role_specs[role] or {}).get("argument_specs", {}) or {}
        entry = next((entries[name] for name in ENTRY_POINTS if entries.get(name)), None)
        options = (entry or {}).get("options") or {}
        for name, spec in options.items():
            merged[name] = dict((key, spec[key]) for key in _SPEC_KEYS if key in spec)
    return merged


def other_hosts_settings(role_specs):
    """The settings of OTHER_HOSTS_ROLES (every entry point's options) that no GPU box reads."""
    names = set()
    for role in OTHER_HOSTS_ROLES:
        for entry in ((role_specs.get(role) or {}).get("argument_specs") or {}).values():
            names.update(((entry or {}).get("options") or {}).keys())
    return frozenset(names - BOX_SIDE)


def unused_play_keywords(values, play_values, defaults):
    """A W_SERIAL problem for each PLAY_KEYWORD_SETTINGS value of this host (``values``) that is not
    what the plays use: ``play_values`` (the command line's, else the play's), else ``defaults``.
    Named for the inventory, not a host, so a fleet gets one warning (Ansible prints each once)."""
    found = []
    for name in PLAY_KEYWORD_SETTINGS:
        if name not in values:
            continue
        used = play_values[name] if name in play_values else defaults.get(name)
        if str(values[name]) != str(used):
            found.append(record("W_SERIAL", "inventory", "%s is %s there, but the plays take %s: Ansible works out a "
                                "play's serial before it reads the inventory" % (name, values[name], used)))
    return found


def _scrub(text, secrets):
    for secret in secrets:
        if secret:
            text = text.replace(str(secret), "********")
    return text


def _setting_of(message, names):
    """The setting an Ansible validation message is about (the longest name it mentions)."""
    found = [name for name in names if name in message]
    return max(found, key=len) if found else None


def settings_problems(spec, values, host):
    """Every bad value among ``values`` (only the settings given are checked) as E_SETTINGS records.

    Types and choices come from ``spec`` (the roles' argument_specs, checked by Ansible's own
    validator); ranges and settings that depend on each other from ``settings.check_settings``.
    Values of ``no_log`` settings never appear in a message.
    """
    given = dict((name, value) for name, value in values.items() if name in spec)
    secrets = [given.get(name) for name, option in spec.items() if option.get("no_log") and given.get(name)]
    result = ArgumentSpecValidator(dict((name, spec[name]) for name in given)).validate(given)
    problems, flagged = [], set()
    for error in result.errors:
        text = _scrub(str(getattr(error, "msg", error)), secrets)
        name = _setting_of(text, given)
        flagged.add(name)
        problems.append(record("E_SETTINGS", host, text, setting=name))
    checked = dict(given)
    checked.update((name, value) for name, value in result.validated_parameters.items() if name in given)
    for entry in check_settings(checked, host):
        if entry.get("setting") not in flagged:
            problems.append(entry)
    return problems
