#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: settings_check
short_description: Check every setting of a host against the roles' argument specs, the recipe's way
description:
  - Runs on the controller, before any role's own argument check. Validates each setting this
    host defines against the C(meta/argument_specs.yml) of every role of the collection (types and
    C(choices), with Ansible's own validator) and the range checks of the recipe's settings
    (pinned revisions, two distinct GPUs, PARALLEL and CONTEXT ranges, ports...).
  - "Checks each value as written, the way the roles and the engine get it (a checked copy cannot
    replace it: C(-e) outranks facts). So it refuses what Ansible's own check would convert but the
    roles read otherwise: text for a list or a mapping (C(-e tensorfold_gpus=0,1); give
    C(-e '{\"tensorfold_gpus\": [0, 1]}')), booleans other than true/false, yes/no, on/off and 1/0
    (any case), numbers that are not plain digits (C(8020.0), C(1e1), spaces, true/false), paths
    with C(~) or C($VARS) (not expanded on the host), and C(auto) or a number with spaces around it."
  - "Also checks the API's bind address (an IP address, IPv6 without brackets), the Hub repository
    ids and endpoint, the served name, the data folder (absolute, not C(/), no C(:), C(,), C(\"),
    C($) or line breaks), batch sizes and failure percentages, the GPU memory limits, Docker image
    names, C(tensorfold_engine_names) (the engine's name rules, no name the collection itself passes
    to the ranks, each name once) and the form of the secrets (never shown)."
  - "A setting whose template fails is a problem naming the setting and Ansible's error (for a
    secret only the undefined name); one waiting on a host fact (an undefined C(ansible_*) name)
    is left to its role, as pre-flight gathers no facts."
  - "Returns every problem at once as C([E_SETTINGS] host: what. What to do.) records, never the
    value of a C(no_log) setting (a secret's value is masked in other messages too, whole words for
    secrets under 8 characters, none under 4), and fails the host with every message (C(msg), one
    per problem) when there is any; the step guard's rescue records them for the fleet report. With
    no problem it sets the fact C(tensorfold_settings_problems) to an empty list."
  - "Warns (C(W_SETTINGS), named for the inventory) about each C(tensorfold_*) variable of the host
    that is no setting of the collection and no variable its roles, playbooks or plugins use,
    naming the closest setting: a misspelled setting is otherwise silently not read."
  - "Also returns the host's settings fingerprint (fact C(tensorfold_settings_fingerprint)), one
    hash of every setting the host defines (no C(no_log) one) and of the collection files that
    shape the image, computed once per run (a later call keeps the fact the first one set), and
    set as a fact only when the settings have no problem.
    M(glm53.tensorfold.converged_info) compares it with the box's deploy record."
  - "With O(image=also), also the engine image's settings, the rules of the role C(tensorfold_image):
    the full 40-hex engine commit, the Zig tarball's 64-hex sha256, a source for the patch series
    (a repository with a 40-hex commit, or a folder on the controller), folders that exist on the
    controller, a registry for the C(registry) strategy, the copy port. site.yml's pre-flight asks
    for them on a GPU host where the run builds the image, so a fleet pays one check per host."
  - Reads the host's variables.
version_added: "0.2.0"
author:
  - glm53.tensorfold contributors (@glm53)
options:
  image:
    description:
      - C(ignore) checks the settings without the engine image's rules.
      - C(also) adds them (a setting already refused is not named twice).
      - C(only) checks the image's settings alone and sets no fact (the role C(tensorfold_image)'s own
        check), so the fingerprint of the run's first check stays as it is.
    type: str
    choices: [ignore, also, only]
    default: ignore
attributes:
  action:
    support: full
    description: Runs entirely on the controller.
  check_mode:
    support: full
    description: Reads settings only.
"""

EXAMPLES = r"""
- name: Check this host's settings
  glm53.tensorfold.settings_check:

- name: Check them and the engine image's settings
  glm53.tensorfold.settings_check:
    image: also
"""

RETURN = r"""
problems:
  description: One record per bad value (C(code), C(severity), C(host), C(message), C(setting)).
  returned: always
  type: list
  elements: dict
fingerprint:
  description: The settings fingerprint (sha256 hex), also set as the fact C(tensorfold_settings_fingerprint).
  returned: unless O(image=only)
  type: str
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action (plugins/action/settings_check.py) checks its arguments against this too.
ARGUMENT_SPEC = dict(image=dict(type="str", choices=["ignore", "also", "only"], default="ignore"))


def main():
    refuse_on_host("settings_check", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
