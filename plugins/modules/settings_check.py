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
    secret only the undefined name). One templated on an undefined C(ansible_*) name (a host fact)
    is refused too: site.yml gathers no facts before its host checks read the settings. A vaulted
    setting that no vault password given decrypts says to give the password (C(--vault-password-file),
    C(--ask-vault-pass) or C(--vault-id))."
  - "Returns every problem at once as C([E_SETTINGS] host: what. What to do.) records, never the
    value of a C(no_log) setting (a secret's value is masked in other messages too, whole words for
    secrets under 8 characters, none under 4). Checking this host alone, it fails the host with every
    message (C(msg), one per problem) when there is any; the step guard's rescue records them for the
    fleet report. With O(hosts), it never fails: each host's problems are in RV(hosts) and
    RV(failed_hosts), for the caller to record (site.yml's step guard records them and takes those
    hosts out of the run)."
  - "Warns (C(W_SETTINGS)) about each C(tensorfold_*) variable of the host that is no setting of any
    role's argument_specs, naming the closest setting: a misspelled setting is otherwise silently not
    read. A variable the collection sets itself during the run (such as C(tensorfold_image_strategy))
    warns too, as the run replaces it. The warning names C(-e) for a command line variable, the
    inventory when every host checked has it, else each host that has it."
  - "Also returns each host's settings fingerprint (RV(hosts), and RV(fingerprint) for a host checked
    alone), one hash of every setting the host defines (no C(no_log) one) and of the collection files
    that shape the image, computed afresh on every call and never kept as a fact (a fact cache would
    carry it into the next run). M(glm53.tensorfold.converged_info) compares it with the box's
    deploy record."
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
      - C(only) checks the image's settings alone and returns no fingerprint (the role C(tensorfold_image)'s own
        check), so the fingerprint of the run's first check stays as it is.
    type: str
    choices: [ignore, also, only]
    default: ignore
  hosts:
    description:
      - "Check these hosts' settings in this one call, each with its own variables for this task (its
        inventory, facts, the play's and the roles' variables, C(-e)), rather than this host's alone."
      - "Meant for C(run_once), so that a fleet's settings cost the controller one task instead of one per
        host; site.yml's pre-flight gives it the batch's hosts. Not with O(image=only)."
    type: list
    elements: str
  image_hosts:
    description:
      - "With O(hosts), the hosts whose engine image settings are also checked, as O(image=also) does for
        a host checked alone (in site.yml's pre-flight, the GPU hosts of a run that may build the image)."
    type: list
    elements: str
    default: []
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

- name: Check the settings of every host of the batch at once
  glm53.tensorfold.settings_check:
    hosts: "{{ ansible_play_batch }}"
  register: checked
  run_once: true
"""

RETURN = r"""
problems:
  description: One record per bad value (C(code), C(severity), C(host), C(message), C(setting)).
  returned: always
  type: list
  elements: dict
fingerprint:
  description: This host's settings fingerprint (sha256 hex).
  returned: without O(hosts), unless O(image=only)
  type: str
hosts:
  description: Each checked host's answer under its name, C(problems) and C(fingerprint).
  returned: unless O(image=only)
  type: dict
failed_hosts:
  description: Each checked host with a problem, C(host) and C(message) (the list of its problems' messages).
  returned: unless O(image=only)
  type: list
  elements: dict
"""

from ansible_collections.glm53.tensorfold.plugins.module_utils.controller_action import refuse_on_host

# The action (plugins/action/settings_check.py) checks its arguments against this too.
ARGUMENT_SPEC = dict(image=dict(type="str", choices=["ignore", "also", "only"], default="ignore"),
                     hosts=dict(type="list", elements="str"),
                     image_hosts=dict(type="list", elements="str", default=[]))


def main():
    refuse_on_host("settings_check", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
