# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Action of glm53.tensorfold.settings_check: every role's settings of this host, on the controller."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os

import yaml

from ansible.errors import AnsibleActionFail
from ansible.parsing.vault import AnsibleVaultError
from ansible.utils.vars import load_extra_vars

from ansible_collections.glm53.tensorfold.plugins.module_utils import image_inputs, settings_spec
from ansible_collections.glm53.tensorfold.plugins.modules import settings_check
from ansible_collections.glm53.tensorfold.plugins.plugin_utils.controller_action import ControllerAction

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(COLLECTION, "roles")
# Files of the collection whose content shapes what a box runs beyond its settings: the image's
# Dockerfile and the collection's version (MANIFEST.json when installed, galaxy.yml in a checkout).
SHAPING_FILES = ("templates/Dockerfile.j2", "MANIFEST.json", "galaxy.yml")
# The site's patches by default (tensorfold_image_site_patches_dir).
SITE_PATCHES = os.path.join(COLLECTION, "files", "patches")
# libyaml's loader when PyYAML has it: it reads the roles' specifications about 8 times faster, and
# they are read once per host in pre-flight.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _role_specs():
    specs = {}
    for path in sorted(glob.glob(os.path.join(ROLES, "*", "meta", "argument_specs.yml"))):
        with open(path) as handle:
            specs[os.path.basename(os.path.dirname(os.path.dirname(path)))] = yaml.load(handle, Loader=_LOADER)  # nosec B506
    return specs


def settings_fingerprint(spec, values, elsewhere=frozenset(), folders=None):
    """One hash of what this host's run wants: every setting it defines (no_log ones, the step
    guard's own options, the settings that only shape how a run goes and those of other hosts,
    ``elsewhere``, left out: the API key is compared on the box, a token shapes nothing) and the
    collection files that shape the image. Equal fingerprints, equal deploys. Each value counts as
    its type reads it (settings_spec.normalised): -e tensorfold_port=8020 is the inventory's 8020.
    A patch folder (settings_spec.CONTENT_FOLDERS) counts by its patches' names and digests
    (``folders``: those already read in this run, by path)."""
    data = {"settings": dict((name, value) for name, value in settings_spec.normalised(spec, values).items()
                             if not spec[name].get("no_log") and not name.startswith("step_")
                             and name not in settings_spec.RUN_ONLY and name not in elsewhere),
            "files": {}}
    folders = {} if folders is None else folders
    for name in settings_spec.CONTENT_FOLDERS:
        folder = data["settings"].get(name)
        if isinstance(folder, str) and folder:
            if folder not in folders:
                folders[folder] = image_inputs.folder_patches(folder)
            data["settings"][name] = {"patches": folders[folder]}
    # The collection's own patch folder, where the site's patches are by default, counts as its
    # other files do (a patch added there is seen whether or not the inventory names the folder).
    if SITE_PATCHES not in folders:
        folders[SITE_PATCHES] = image_inputs.folder_patches(SITE_PATCHES)
    data["files"]["files/patches"] = folders[SITE_PATCHES]
    for name in SHAPING_FILES:
        try:
            with open(os.path.join(COLLECTION, name), "rb") as handle:
                data["files"][name] = hashlib.sha256(handle.read()).hexdigest()
        except (IOError, OSError):
            continue
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _spec_defaults(role_specs):
    defaults = {}
    for entries in role_specs.values():
        for entry in ((entries or {}).get("argument_specs") or {}).values():
            for name, option in ((entry or {}).get("options") or {}).items():
                if "default" in (option or {}):
                    defaults.setdefault(name, option["default"])
    return defaults


def _vault_error(error):
    """Whether a templating error is, or was caused by, Ansible's failure to decrypt a vaulted value
    (no vault password given, or not the one it was encrypted with): AnsibleVaultError, or in
    ansible-core 2.19 its templating's UndecryptableVaultError (a private class, known by its name)."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, AnsibleVaultError) or type(error).__name__.endswith("VaultError"):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


IMAGE_PREFIX = "tensorfold_image_"


def _image_problems(values, defaults, host, earlier):
    """The image settings' problems (module_utils/image_inputs.py), on the values as the role gets
    them (its defaults where the host sets none); a setting named in ``earlier`` is not named twice."""
    flagged = set(entry.get("setting") for entry in earlier)
    image_values = dict((name, values.get(name, defaults.get(name))) for name in set(values) | set(defaults)
                        if name.startswith(IMAGE_PREFIX))
    return [entry for entry in image_inputs.settings_problems(image_values, host, os.path.isdir)
            if entry["setting"] not in flagged]


class ActionModule(ControllerAction):

    ARGUMENT_SPEC = settings_check.ARGUMENT_SPEC

    def _extra_vars(self):
        """The command line's -e variables."""
        return load_extra_vars(self._loader)

    def _play_keyword_values(self):
        """What a play's serial keyword sees of PLAY_KEYWORD_SETTINGS: the command line's values,
        else the play's own (an importing playbook's vars land there)."""
        found = {}
        get_play = getattr(self._task, "get_play", None)
        play_vars = (getattr(get_play(), "vars", None) if get_play else None) or {}
        extra = self._extra_vars()
        for name in settings_spec.PLAY_KEYWORD_SETTINGS:
            if name in extra:
                found[name] = extra[name]
            elif name in play_vars:
                found[name] = self._templar.template(play_vars[name])
        return found

    def _values(self, spec, names, task_vars, host, templar, defaults):
        """The settings among ``names`` that this host defines, templated, and the problems of those
        whose template fails. A template may name another setting this host leaves at its default
        (the demo's gateway_public_url names gateway_port): the role that reads it has its defaults
        loaded, and this play has not, so such a template is tried again over the defaults."""
        values, unresolved = {}, []
        with_defaults = None
        for name in names:
            if name not in task_vars:
                continue
            try:
                try:
                    values[name] = templar.template(task_vars[name])
                except Exception as error:  # pylint: disable=broad-except  # tried again below, else reported
                    undefined = settings_spec.undefined_name(error)
                    if undefined not in defaults or undefined in task_vars:
                        raise
                    if with_defaults is None:
                        layered = dict(defaults)
                        layered.update(task_vars)
                        with_defaults = templar.copy_with_new_env(available_variables=layered)
                    values[name] = with_defaults.template(task_vars[name])
            except Exception as error:  # pylint: disable=broad-except  # any templating error is the setting's problem
                entry = settings_spec.unresolved_setting(name, error, host, bool(spec[name].get("no_log")),
                                                         vault=_vault_error(error))
                if entry:
                    unresolved.append(entry)
        return values, unresolved

    def _host_task_vars(self, task_vars, name):
        """What this task's variables are on host ``name``, as the strategy would give them to its
        worker there: its inventory, facts and registered answers, the play's and the roles' variables,
        -e. ansible-core offers no public call for another host's task variables; HostVars holds
        the variable manager that makes them."""
        if name == task_vars.get("inventory_hostname"):
            return task_vars
        hostvars = task_vars["hostvars"]
        host = hostvars._inventory.get_host(name)  # pylint: disable=protected-access
        if host is None:
            raise AnsibleActionFail("settings_check: %s is not a host of the inventory" % name)
        found = hostvars._variable_manager.get_vars(  # pylint: disable=protected-access
            play=self._task.get_play(), host=host, task=self._task)
        # The run's own state the strategy adds to every host's variables alike.
        for key in ("ansible_current_hosts", "ansible_failed_hosts"):
            if key in task_vars:
                found.setdefault(key, task_vars[key])
        return found

    def _check_host(self, host, task_vars, templar, image, shared):
        """One host's problems, fingerprint and warnings (``shared``: what every host's check reads alike)."""
        spec, defaults = shared["spec"], shared["defaults"]
        values, unresolved = self._values(spec, spec, task_vars, host, templar, defaults)
        # The inventory's groups: the image's build host and a gateway host's rules read them.
        problems = settings_spec.settings_problems(spec, values, host, unresolved, task_vars.get("groups"), defaults,
                                                   memo=shared["validated"])
        if image:
            # The image's own rules (site.yml's pre-flight in a run that builds it: one check, not two).
            problems += _image_problems(values, defaults, host, problems)
        warnings = settings_spec.unused_play_keywords(values, shared["play_keywords"], defaults)
        # tensorfold_* names that are no setting: warned about once every host's are known (answer).
        strangers = [name for name in task_vars if name.startswith("tensorfold_") and name not in spec]
        # Computed afresh, never taken from a fact: a fingerprint that a fact cache kept from an
        # earlier run would hide changed settings from the fast path.
        fingerprint = settings_fingerprint(spec, values, shared["elsewhere"], shared["folders"])
        return {"problems": problems, "fingerprint": fingerprint, "warnings": [entry["message"] for entry in warnings],
                "strangers": strangers}

    @staticmethod
    def _stranger_warnings(spec, checked, extra):
        """W_SETTINGS for the tensorfold_* names that are no setting, each named where it was given:
        -e, the inventory when every checked host has it (one warning, not one per host), else each
        host that has it."""
        holders = {}
        for host, answer in checked.items():
            for name in answer.pop("strangers"):
                holders.setdefault(name, []).append(host)
        found = []
        for name, hosts in sorted(holders.items()):
            if name in extra:
                wheres = ["-e"]
            elif len(checked) > 1 and len(hosts) == len(checked):
                wheres = ["inventory"]
            else:
                wheres = hosts
            for where in wheres:
                found += settings_spec.unknown_settings([name], spec, where)
        return [entry["message"] for entry in found]

    def answer(self, args, task_vars):
        result = {}
        image = args["image"]
        role_specs = _role_specs()
        spec = settings_spec.merge_specs(role_specs)
        host = task_vars.get("inventory_hostname", "host")
        defaults = _spec_defaults(role_specs)
        if image == "only":
            # The image role's own check (its tasks/validate.yml): every other setting was checked in
            # this run's first play, and the fingerprint that play published stays as it is.
            names = [name for name in spec if name.startswith(IMAGE_PREFIX)]
            values, unresolved = self._values(spec, names, task_vars, host, self._templar, defaults)
            problems = unresolved + _image_problems(values, defaults, host, unresolved)
            result.update(problems=problems)
            if problems:
                result.update(failed=True, msg=[entry["message"] for entry in problems])
            return result
        elsewhere = settings_spec.other_hosts_settings(role_specs) | settings_spec.fingerprint_excluded(role_specs)
        shared = {"spec": spec, "role_specs": role_specs, "defaults": defaults, "play_keywords": self._play_keyword_values(),
                  "validated": {}, "elsewhere": elsewhere, "folders": {}}
        names = args["hosts"] if args["hosts"] is not None else [host]
        checked, warnings = {}, []
        for name in names:
            host_vars = self._host_task_vars(task_vars, name)
            templar = self._templar if host_vars is task_vars else self._templar.copy_with_new_env(available_variables=host_vars)
            checked[name] = self._check_host(name, host_vars, templar, image == "also" or name in args["image_hosts"], shared)
            warnings += [message for message in checked[name].pop("warnings") if message not in warnings]
        warnings += self._stranger_warnings(spec, checked, self._extra_vars())
        if warnings:
            result["warnings"] = warnings
        problems = [entry for name in names for entry in checked[name]["problems"]]
        # Each host's answer under its name (site.yml's readers take this host's: roles/tensorfold/vars/main.yml).
        result.update(hosts=checked, problems=problems,
                      failed_hosts=[{"host": name, "message": [entry["message"] for entry in checked[name]["problems"]]}
                                    for name in names if checked[name]["problems"]])
        if args["hosts"] is None:
            result["fingerprint"] = checked[host]["fingerprint"]
            if problems:
                # Failing here rather than in a task of its own saves every host one skipped task in every
                # play whose roles depend on roles/tensorfold. The step's rescue records these messages,
                # codes included, for the fleet report (step_failure).
                result.update(failed=True, msg=[problem["message"] for problem in problems])
        return result
