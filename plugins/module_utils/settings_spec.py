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

import difflib
import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.glm53.tensorfold.plugins.module_utils import settings
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

# The entry points whose options shape what a box runs: a role's ``main``, and roles/tensorfold's
# ``settings`` (named so that Ansible does not check its 100+ settings again in every play). The
# options of the other entry points (the bundle's build, drain, render...) are checked as well, but
# only these count in the settings fingerprint (fingerprint_excluded).
ENTRY_POINTS = ("main", "settings")


def _entries(role_specs):
    """(role, entry point, options) of every entry point of every role, in a stable order."""
    for role in sorted(role_specs):
        entries = (role_specs[role] or {}).get("argument_specs", {}) or {}
        for entry in sorted(entries, key=lambda name: (name not in ENTRY_POINTS, name)):
            yield role, entry, ((entries[entry] or {}).get("options") or {})


def merge_specs(role_specs):
    """One option spec from ``{role: argument_specs dict}``: the options of every entry point of every
    role. A name given in two places must have the same spec there (type, elements, choices, options,
    no_log, a null default or not): one value is checked once for all its readers. A ValueError names
    the two places otherwise."""
    merged, where = {}, {}
    for role, entry, options in _entries(role_specs):
        for name, spec in options.items():
            option = dict((key, spec[key]) for key in _SPEC_KEYS if key in spec)
            if "default" in spec and spec["default"] is None:
                option["default"] = None  # null is then a value of its own (_null_default)
            if name in merged and merged[name] != option:
                raise ValueError("%s is specified differently in %s and %s/%s: give it the same type, elements, choices, "
                                 "options, no_log and null default in both" % (name, where[name], role, entry))
            merged.setdefault(name, option)
            where.setdefault(name, "%s/%s" % (role, entry))
    return merged


def fingerprint_excluded(role_specs):
    """The options of no ``main`` or ``settings`` entry point (the bundle's build, a gateway's drain...):
    checked in pre-flight, left out of the settings fingerprint as before they were checked, so a
    converged box's record stays valid."""
    counted = set()
    for _role, entry, options in _entries(role_specs):
        if entry in ENTRY_POINTS:
            counted.update(options)
    return frozenset(name for _role, _entry, options in _entries(role_specs) for name in options) - counted


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


# How a secret's value is masked in the other settings' messages: shorter than MIN_MASKED_SECRET
# not at all (masking "1" would garble every number; the checks refuse such keys, and never print a
# secret setting's own value), shorter than MIN_SUBSTRING_SECRET only as a whole token (a key
# "short" must not mask "shorter"), longer ones wherever they appear.
MIN_MASKED_SECRET = 4
MIN_SUBSTRING_SECRET = 8


def _scrub(text, secrets):
    for secret in secrets:
        if not isinstance(secret, str) or len(secret) < MIN_MASKED_SECRET:
            continue
        if len(secret) >= MIN_SUBSTRING_SECRET:
            text = text.replace(secret, "********")
        else:
            text = re.sub(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(secret), "********", text)
    return text


def _setting_of(message, names):
    """The setting an Ansible validation message is about (the longest name it mentions)."""
    found = [name for name in names if name in message]
    return max(found, key=len) if found else None


def _list_example(option):
    return "[0, 1]" if option.get("elements") in ("int", "float") else '["a", "b"]'


def _null_default(option):
    """Whether the spec gives the option a null default: null then means "worked out" (documented
    with the option), a value the roles take as it is."""
    return "default" in option and option["default"] is None


def raw_form_problems(spec, values, host):
    """E_SETTINGS records for values whose raw form the roles would read differently from
    Ansible's argument check: the check converts a copy, but the roles get the raw value (and a
    checked copy cannot be published over it: -e outranks facts). Booleans must be forms that the
    check, the bool filter and the engine read alike, numbers plain digits, lists and mappings real
    ones (the check splits "0,1" and parses JSON text; the roles do not)."""
    problems = []

    def bad(name, what, todo):
        problems.append(record("E_SETTINGS", host, "%s %s" % (name, what), todo, setting=name))

    for name in sorted(values):
        option, value = spec[name], values[name]
        kind = option.get("type", "str")
        shown = "(not shown: a secret)" if option.get("no_log") else repr(value)
        if kind == "bool" and settings.plain_bool(value) is None:
            bad(name, "is %s, which Ansible and the engine would not all read the same way" % shown,
                "Use true or false (also yes/no, on/off, 1/0, any case, no spaces).")
        elif kind == "int" and settings.plain_int(value) is None and not (value is None and _null_default(option)):
            bad(name, "is %s, not a whole number" % shown,
                "Write it with digits only, such as 8020 (no decimal point, exponent, spaces or true/false).")
        elif kind == "float" and settings.plain_number(value) is None:
            bad(name, "is %s, not a plain number" % shown,
                "Write it as digits with an optional decimal point, such as 4 or 3.5 (no exponent, spaces or true/false).")
        elif kind == "list" and value is not None and not isinstance(value, (list, tuple)):
            example = _list_example(option)
            bad(name, "is %s, not a list" % ("the text %s" % shown if isinstance(value, str) else shown),
                "Give a list: in YAML %s; on the command line -e '{\"%s\": %s}' (-e %s=... gives text)."
                % (example, name, example, name))
        elif kind == "list" and option.get("elements") == "int" and isinstance(value, (list, tuple)):
            odd = [item for item in value if settings.plain_int(item) is None]
            if odd:
                bad(name, "holds %r, not whole numbers" % (odd,), "List whole numbers written with digits only, such as [0, 1].")
        elif kind == "dict" and value is not None and not isinstance(value, dict):
            bad(name, "is %s, not a mapping" % ("the text %s" % shown if isinstance(value, str) else shown),
                "Give a mapping: in YAML {key: value}; on the command line -e '{\"%s\": {\"key\": \"value\"}}'." % name)
    return problems


def unresolved_setting(name, error, host, secret=False):
    """An E_SETTINGS record for a setting whose template failed. The error's text is Ansible's,
    such as "'undefined' is undefined"; for a secret setting only an undefined name is told,
    nothing else of its template. An undefined ``ansible_*`` name (a host fact, or a name that is
    none) is refused too: site.yml's plays gather no facts before the host checks read the settings
    (gather_facts: false), so the value would fail there or later, uncoded, after host steps ran."""
    text = str(getattr(error, "message", None) or error).strip().splitlines()
    text = text[0] if text else type(error).__name__
    undefined = re.match(r"^'([A-Za-z_][A-Za-z0-9_]*)' is undefined", text)
    todo = "Define what it refers to, or give the value itself."
    if undefined and undefined.group(1).startswith("ansible_"):
        todo = ("%s is neither in the inventory nor a fact the run has when it uses the setting (site.yml gathers "
                "no facts before its host checks): give the value itself, per host in host_vars where it differs."
                % undefined.group(1))
    if secret:
        text = "%s is undefined" % undefined.group(1) if undefined else "details not shown: a secret"
    elif len(text) > 200:
        text = text[:200] + "..."
    return record("E_SETTINGS", host, "%s could not be templated (%s)" % (name, text), todo, setting=name)


# Where the collection's own variable names are read from: every name the roles, playbooks and
# plugins mention (settings, defaults, role vars, set_fact, register, facts of the plugins), and
# the test scenarios' (molecule/, in a checkout). A superset of what a run defines, so that its own
# variables never warn; a misspelling of a setting is mentioned nowhere.
_OWN_NAME_DIRS = ("roles", "playbooks", "plugins", "molecule")
_OWN_NAME = re.compile(r"\btensorfold_[a-z0-9_]*[a-z0-9]")
_OWN_NAMES = {}


def collection_names(root):
    """Every ``tensorfold_*`` name the collection's files under ``root`` mention (read once)."""
    if root not in _OWN_NAMES:
        names = set()
        for folder in _OWN_NAME_DIRS:
            for base, _dirs, files in os.walk(os.path.join(root, folder)):
                for name in files:
                    if name.endswith((".yml", ".yaml", ".j2", ".py")):
                        with open(os.path.join(base, name), encoding="utf-8", errors="replace") as handle:
                            names.update(_OWN_NAME.findall(handle.read()))
        _OWN_NAMES[root] = frozenset(names)
    return _OWN_NAMES[root]


def unknown_settings(names, known, settings_names, host):
    """A W_SETTINGS record for each ``tensorfold_*`` name among ``names`` (the host's variables)
    that the collection neither defines nor sets (``known``), with the closest setting of
    ``settings_names`` when one is near: a misspelled setting is silently not read."""
    found = []
    for name in sorted(names):
        if not name.startswith("tensorfold_") or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(settings_names), n=1, cutoff=0.75)
        todo = ("Did you mean %s? Rename it; as it is, nothing reads it and the default applies." % close[0] if close
                else "Check its name in docs/ or roles/tensorfold/meta/argument_specs.yml; as it is, nothing reads it.")
        found.append(record("W_SETTINGS", host, "%s is not a setting of glm53.tensorfold" % name, todo, setting=name))
    return found


def _canonical(value):
    """A hashable form of a setting's value that keeps its type at every level: two values with the
    same form get the same verdict from Ansible's validator."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(key), _canonical(item)) for key, item in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(item) for item in value))
    return (type(value).__name__, repr(value))


def _validated(spec, rest, memo):
    """Ansible's validator on ``rest``: its messages, setting by setting in the order given, and the
    booleans as it converted them. ``memo`` (a dict kept for one ``spec``) holds each setting's
    verdict by its value: a fleet's hosts share most of their values, and the validator copies
    every value it is given, so a value seen on an earlier host is not validated again. The spec
    holds no rule between settings (merge_specs keeps options only), so a setting's verdict is its
    own; a message that names no setting of those validated is not kept for another host."""
    memo = {} if memo is None else memo
    keys = dict((name, (name, _canonical(value))) for name, value in rest.items())
    todo = dict((name, value) for name, value in rest.items() if keys[name] not in memo)
    stray = []
    if todo:
        result = ArgumentSpecValidator(dict((name, spec[name]) for name in todo)).validate(todo)
        found = dict((name, []) for name in todo)
        for error in result.errors:
            text = str(getattr(error, "msg", error))
            name = _setting_of(text, todo)
            (found[name] if name in found else stray).append(text)
        converted = result.validated_parameters
        for name in todo:
            memo[keys[name]] = (found[name], spec[name].get("type") == "bool" and name in converted, converted.get(name))
    errors = [text for name in rest for text in memo[keys[name]][0]]
    booleans = dict((name, memo[keys[name]][2]) for name in rest if memo[keys[name]][1])
    if stray:
        for name in todo:
            del memo[keys[name]]
    return errors + stray, booleans


def settings_problems(spec, values, host, earlier=(), groups=None, defaults=None, memo=None):
    """Every bad value among ``values`` (only the settings given are checked) as E_SETTINGS records.

    The raw forms first (raw_form_problems), then types and choices from ``spec`` (the roles'
    argument_specs, checked by Ansible's own validator), then ranges and settings that depend on
    each other from ``settings.check_settings``, on the raw values as the roles get them (booleans,
    whose accepted forms all read alike, converted). One problem per setting; values of ``no_log``
    settings never appear in a message. ``earlier``: problems found before (settings whose template
    failed: unresolved_setting), put first and masked the same way. ``memo``: a dict kept across
    the hosts of one check with the same ``spec`` (see _validated).
    """
    given = dict((name, value) for name, value in values.items() if name in spec)
    secrets = []
    for name, option in spec.items():
        value = given.get(name) if option.get("no_log") else None
        # A secret given as a list or mapping (refused) is masked item by item.
        secrets += list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple)) else [value]
    problems = list(earlier) + raw_form_problems(spec, given, host)
    flagged = set(entry["setting"] for entry in problems)
    # Ansible's check sees only the values whose form passed: its messages about the rest (one per
    # piece of "[0,1]", or none naming the setting) would only repeat ours.
    rest = dict((name, value) for name, value in given.items() if name not in flagged)
    errors, booleans = _validated(spec, rest, memo)
    for text in errors:
        name = _setting_of(text, rest)
        if name in flagged and name is not None:
            continue
        flagged.add(name)
        if name and spec[name].get("no_log"):
            text = "%s is not a valid %s (the value is not shown: a secret)" % (name, spec[name].get("type", "str"))
        problems.append(record("E_SETTINGS", host, text, setting=name))
    checked = dict(given)
    checked.update(booleans)
    problems += [entry for entry in check_settings(checked, host, groups, defaults) if entry.get("setting") not in flagged]
    for entry in problems:
        entry["message"] = _scrub(entry["message"], secrets)
    return problems
