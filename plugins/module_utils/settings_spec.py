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
    "weights_fetch_peer_fanout", "weights_fetch_peer_address",
    "smoke_test_timeout",
    # Where the controller keeps its copy of the patch series (under $HOME by default): the series
    # in it is the one tensorfold_image_patch_series_commit names, which counts.
    "tensorfold_image_controller_cache",
))

# Settings naming a folder on the controller whose files shape the image: they count in the
# fingerprint by the names and digests of the patches in it, not by where the folder is (the site's
# patches default to the collection's own folder, so the path changes with the checkout's place):
# a checkout moved, or a run from another account, leaves a converged fleet converged, and an edited
# patch does not.
CONTENT_FOLDERS = ("tensorfold_image_patch_series_dir", "tensorfold_image_site_patches_dir")

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
# Roles whose options are no settings: the step guard's are what the playbooks pass it (step_roles,
# step_name...), templated in the guard's own context, never given by an operator.
NOT_SETTINGS_ROLES = ("step",)


def _entries(role_specs):
    """(role, entry point, options) of every entry point of every role, in a stable order."""
    for role in sorted(set(role_specs) - set(NOT_SETTINGS_ROLES)):
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


def undefined_name(error):
    """The name a failed template found undefined (Ansible's "'NAME' is undefined"), else None."""
    lines = str(getattr(error, "message", None) or error).strip().splitlines()
    found = re.search(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined", lines[0] if lines else "")
    return found.group(1) if found else None


def unresolved_setting(name, error, host, secret=False, vault=False):
    """An E_SETTINGS record for a setting whose template failed. The error's text is Ansible's,
    such as "'undefined' is undefined"; for a secret setting only an undefined name is told,
    nothing else of its template. An undefined ``ansible_*`` name (a host fact, or a name that is
    none) is refused too: site.yml's plays gather no facts before the host checks read the settings
    (gather_facts: false), so the value would fail there or later, uncoded, after host steps ran.
    ``vault``: the error is Ansible's failure to decrypt a vaulted value (the caller tells)."""
    if vault:
        return record("E_SETTINGS", host, "%s is vaulted, and no vault password given could decrypt it" % name,
                      "Give the vault's password: --vault-password-file FILE, --ask-vault-pass or --vault-id.",
                      setting=name)
    text = str(getattr(error, "message", None) or error).strip().splitlines()
    text = text[0] if text else type(error).__name__
    undefined = undefined_name(error)
    todo = "Define what it refers to, or give the value itself."
    if undefined and undefined.startswith("ansible_"):
        todo = ("%s is neither in the inventory nor a fact the run has when it uses the setting (site.yml gathers "
                "no facts before its host checks): give the value itself, per host in host_vars where it differs."
                % undefined)
    if secret:
        text = "%s is undefined" % undefined if undefined else "details not shown: a secret"
    elif len(text) > 200:
        text = text[:200] + "..."
    return record("E_SETTINGS", host, "%s could not be templated (%s)" % (name, text), todo, setting=name)


# The collection's own tensorfold_* variables that are no setting: what its roles register, set_fact
# or keep in vars (tests/unit/plugins/action/test_settings_names.py reads them off the roles and
# playbooks and fails on one missing here). Given in an inventory or -e, the run replaces them: a
# warning too, unless the run itself defines them when the settings are checked (CHECK_TIME_NAMES).
INTERNAL_NAMES = frozenset((
    "tensorfold_image_archive", "tensorfold_image_archive_stat", "tensorfold_image_build", "tensorfold_image_build_args",
    "tensorfold_image_built_identity", "tensorfold_image_collection_meta", "tensorfold_image_collection_version",
    "tensorfold_image_deployed", "tensorfold_image_dockerfile", "tensorfold_image_identity", "tensorfold_image_info",
    "tensorfold_image_inputs", "tensorfold_image_lacking", "tensorfold_image_loaded", "tensorfold_image_move_secret",
    "tensorfold_image_needs_copy", "tensorfold_image_present", "tensorfold_image_pulled", "tensorfold_image_ref",
    "tensorfold_image_registry_pull", "tensorfold_image_series", "tensorfold_image_series_dir",
    "tensorfold_image_source_address", "tensorfold_image_source_host", "tensorfold_image_source_identity",
    "tensorfold_image_source_images", "tensorfold_image_source_info", "tensorfold_image_source_state",
    "tensorfold_image_strategy", "tensorfold_image_tag", "tensorfold_settings_checked", "tensorfold_settings_fingerprint",
))
# Defined by the run when the check reads a host's variables: roles/tensorfold's vars, and the check's
# own registered answer (a second check in one run, such as the image role's).
CHECK_TIME_NAMES = frozenset(("tensorfold_settings_fingerprint", "tensorfold_settings_checked"))
# The test scenarios' own variables (molecule/tensorfold_image).
TEST_PREFIX = "tensorfold_image_test_"


def unknown_settings(names, settings_names, where):
    """A W_SETTINGS record for each ``tensorfold_*`` name among ``names`` (variables given for
    ``where``: a host, or the inventory when every host has it) that is no setting of
    ``settings_names``, with the closest setting when one is near: a misspelled setting is silently
    not read, and a variable the collection sets itself (INTERNAL_NAMES) is replaced during the run."""
    found = []
    for name in sorted(names):
        if (not name.startswith("tensorfold_") or name in settings_names or name in CHECK_TIME_NAMES
                or name.startswith(TEST_PREFIX)):
            continue
        close = difflib.get_close_matches(name, sorted(settings_names), n=1, cutoff=0.75)
        what = "is not a setting of glm53.tensorfold" + (
            " (the collection sets this variable itself during the run, replacing the value given)"
            if name in INTERNAL_NAMES else "")
        todo = ("Did you mean %s? Rename it; as it is, nothing reads it and the default applies." % close[0] if close
                else "Check its name in docs/ or roles/tensorfold/meta/argument_specs.yml; as it is, nothing reads it.")
        found.append(record("W_SETTINGS", where, "%s %s" % (name, what), todo, setting=name))
    return found


def normalised(spec, values):
    """``values`` with each written the one way its type reads it, for the settings fingerprint: a
    whole number given as text ("8020", as -e gives it) is the number, a boolean in any accepted form
    ("true", "yes", 1) True or False, a decimal given as text the number, "auto" of a setting that
    takes a number or auto lower-case. A value already in that form is left as it is (a YAML 8020,
    true or 3.5), and so is a value the check refuses."""
    found = {}
    for name, value in values.items():
        kind = (spec.get(name) or {}).get("type", "str")
        if kind in ("int", "raw") and isinstance(value, str):
            parsed = settings.parse_parallel(value) if value == value.strip() else None
            value = value if parsed is None else parsed
        elif kind == "bool" and settings.plain_bool(value) is not None:
            value = settings.plain_bool(value)
        elif kind == "float" and isinstance(value, str) and settings.plain_number(value) is not None:
            value = settings.plain_int(value) if settings.plain_int(value) is not None else settings.plain_number(value)
        found[name] = value
    return found


def _canonical(value):
    """A hashable form of a setting's value that keeps its type at every level: two values with the
    same form get the same verdict from Ansible's validator."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(key), _canonical(item)) for key, item in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_canonical(item) for item in value))
    return (type(value).__name__, repr(value))


# What Ansible's validator says of a mapping's key its options do not name ("x.KEY, x.OTHER.
# Supported parameters include: a, b."; AnsibleModule would put "Unsupported parameters" before it),
# and what a key of each such setting is called in our messages.
_UNSUPPORTED = re.compile(r"^(?P<keys>.+?)\. Supported parameters include: (?P<supported>.*?)\.?$")
KEY_WORDS = {"tensorfold_engine_names": "knob"}


def _unsupported_text(error, names):
    """Our message for an UnsupportedError about one of ``names``, or None for another error."""
    match = _UNSUPPORTED.match(str(getattr(error, "msg", error))) if type(error).__name__ == "UnsupportedError" else None
    name = _setting_of(match.group("keys"), names) if match else None
    if name is None:
        return None
    word = KEY_WORDS.get(name, "key")
    keys = [key.split(".", 1)[-1] for key in match.group("keys").split(", ")]
    return "%s has %s, which %s; the supported %ss: %s" % (
        name, " and ".join(keys), "is not a %s" % word if len(keys) == 1 else "are not %ss" % word, word,
        match.group("supported"))


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
            text = _unsupported_text(error, todo) or str(getattr(error, "msg", error))
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
