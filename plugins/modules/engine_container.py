#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: engine_container
short_description: Start, restart or stop the container that runs both ranks of tensorfold-native
description:
  - Starts the engine container the recipe's way and waits until rank 0's API answers, or stops it.
  - A start takes the host's start lock (an flock on C(DATA_DIR/.state/start.lock) held by this module's
    own process, so it ends with the start however the start ends), lets the engine check its flags
    in a throw-away container with the same mounts, stops the old container, starts the new one,
    and waits for C(/health), failing at once when the container ends.
  - With O(context=auto), a memory-fit refusal is answered once with the largest window the engine's
    own figures allow, and once more when the next refusal names other figures (the other rank's);
    a refusal of the model's window, which names no memory figures, is answered with that window
    and does not count (four starts at most). The window that served is recorded in
    C(DATA_DIR/.state/context-fit.tsv) under the key of O(fit_fields). Otherwise a refusal fails,
    naming the window that would fit.
  - What was started (image, GPUs, window) is recorded in C(DATA_DIR/.state/engine.json), so a restart
    finds the image when no container runs.
  - Once the API answers the container gets O(restart_policy), so a Docker or host restart brings it
    back and a rank that keeps dying is restarted a bounded number of times.
  - A container of O(name) running with the same settings is left alone (C(changed=false)).
  - The ranks' command lines come from C(engine_args), the builder the C(--check) plan uses too.
  - Where the connection pipelines, outside check mode, its action runs the same flow in the host's own
    Python with no AnsiballZ (the box reader); C(read_with) says which ran.
version_added: 0.2.0
author:
  - glm53.tensorfold contributors (@glm53)
options:
  state:
    description: C(started) leaves a container with the same settings alone; C(restarted) stops and starts; C(stopped) stops and archives the logs.
    type: str
    choices: [started, restarted, stopped]
    default: started
  host:
    description: The inventory name used in messages.
    type: str
    required: true
  name:
    description: The container's name.
    type: str
    default: glm53-zig
  label:
    description: The label marking the container as ours; only a container with it is ever stopped.
    type: str
    default: glm53.tensorfold.rank_container
  image:
    description: The image to run; empty takes the running container's, else the recorded one.
    type: str
    default: ""
  settings:
    description: The recipe's C(tensorfold_*) settings the engine's argv is built from.
    type: dict
    required: true
  engine_args:
    description: More engine flags for both ranks.
    type: list
    elements: str
    default: []
  context:
    description: The window, a number or C(auto).
    type: str
    required: true
  auto_context:
    description: The window C(auto) asks for first.
    type: int
    default: 1048576
  fit_fields:
    description:
      - What the context fit depends on (GPU name and memory, checkpoint revision, image tag, PARALLEL, KV,
        KV_PAGES, DENSE, HEAD, VISION, DRAFTER, MEMORY_RESERVE_GIB); the cache key is their SHA-256.
      - An empty C(image_tag) is the tag of the image the module runs; without C(gpu_name) and
        C(gpu_memory_mib) the module takes rank 0's card (O(gpus)).
    type: dict
    default: {}
  page_rows:
    description: KV page rows; the window C(auto) settles on is a multiple of it.
    type: int
    default: 512
  parallel:
    description: The streams asked for, a number or C(auto).
    type: str
    default: "4"
  api_key:
    description: The API key; written to a 0600 file mounted read-only for rank 0, never on a command line.
    type: str
    default: ""
  data_dir:
    description: The host's data folder (C(.state), C(logs)).
    type: path
    required: true
  model_dir:
    description: The checkpoint folder, mounted read-only at C(/model).
    type: path
    required: true
  drafter_dir:
    description: The DFlash2 folder mounted read-only at C(/drafter); empty for none.
    type: str
    default: ""
  cache_dir:
    description: The engine's cache folder.
    type: path
    required: true
  gpu_indices:
    description:
      - The two cards' nvidia-smi indices, in rank order (C(tensorfold_gpus)).
    type: list
    elements: int
    required: true
  gpus:
    description:
      - The cards as the host checks read them (C(gpu_host_checks_gpus)), in rank order.
      - Without them a start reads the host's cards itself with one C(nvidia-smi) call. With a UUID
        for every card the container asks for the cards by UUID, else by index (also when
        C(nvidia-smi) is missing or fails). Rank 0's card names the GPU of the context-fit cache key.
    type: list
    elements: dict
  gpu_requests:
    description: Hand the GPUs to the container.
    type: bool
    default: true
  env:
    description: More container environment (not for secrets).
    type: dict
    default: {}
  ulimits:
    description: Ulimits as C(NAME:SOFT:HARD).
    type: list
    elements: str
    default: []
  api_host:
    description: The address the API is asked on.
    type: str
    default: 127.0.0.1
  port:
    description: The API port.
    type: int
    default: 8020
  wait_timeout:
    description: Seconds to wait for the API.
    type: int
    default: 2400
  lock_wait:
    description:
      - Seconds to wait for another start to release the lock before failing with E_LOCK.
      - Unset, the longest another start may hold it - four starts each waiting up to O(wait_timeout), the stop's
        O(stop_grace) twice, and 120 s for the argument check and docker's own steps - so a start waits out one
        in progress.
    type: int
  log_tail_lines:
    description: Lines of each rank log shown on a failed start.
    type: int
    default: 25
  stop_grace:
    description: Seconds rank 0 gets to finish open requests.
    type: int
    default: 20
  restart_policy:
    description: Docker restart policy given once the API answers (a start itself never restarts).
    type: str
    default: on-failure:3
  defer_replace:
    description:
      - With I(state=started), a running container of this role whose settings fingerprint or API key differs is
        left serving, untouched, and the result's status is C(replace_pending) (the rolling restart step then
        replaces it, drained at the gateway). Check mode says it would drain and restart.
      - The rank_container role sets it when the inventory has gateways.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Says what it would do; nothing is written or started.
  diff_mode:
    support: none
    description: Returns no diff.
notes:
  - "Uses the C(docker) command line; problems are reported as C([CODE] host: what. What to do.)."
"""

EXAMPLES = r"""
- name: Start both ranks
  glm53.tensorfold.engine_container:
    host: "{{ inventory_hostname }}"
    image: tensorfold:3f2a
    settings: "{{ engine_settings }}"
    context: auto
    fit_fields: "{{ fit_fields }}"
    data_dir: /srv/glm53
    model_dir: /srv/glm53/model
    drafter_dir: /srv/glm53/drafter
    cache_dir: /srv/glm53/.cache
    gpu_indices: [0, 1]
    gpus: "{{ ansible_facts.gpu_host_checks_gpus }}"
  register: started
"""

RETURN = r"""
result:
  description:
    - C(status) (running, would_start, replace_pending, stopped, not_deployed), C(endpoint), C(context), C(streams),
      C(starts), C(log_dir), C(warnings).
    - For a running container also C(fingerprint), its settings label (the deploy record keeps it).
  returned: always
  type: dict
messages:
  description: Lines for the operator (open requests at a stop, what check mode would do, nothing to restart).
  returned: always
  type: list
  elements: str
read_with:
  description: Which ran the flow, C(box reader) (the host's Python ran the module's code, no AnsiballZ) or C(module).
  returned: when run by its action
  type: str
  sample: box reader
code:
  description: The failure's code when the module failed.
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_container import run_module


ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["started", "restarted", "stopped"], default="started"),
    host=dict(type="str", required=True),
    name=dict(type="str", default="glm53-zig"),
    label=dict(type="str", default="glm53.tensorfold.rank_container"),
    image=dict(type="str", default=""),
    settings=dict(type="dict", required=True),
    engine_args=dict(type="list", elements="str", default=[]),
    context=dict(type="str", required=True),
    auto_context=dict(type="int", default=1048576),
    fit_fields=dict(type="dict", default={}),
    page_rows=dict(type="int", default=512),
    parallel=dict(type="str", default="4"),
    api_key=dict(type="str", default="", no_log=True),
    data_dir=dict(type="path", required=True),
    model_dir=dict(type="path", required=True),
    drafter_dir=dict(type="str", default=""),
    cache_dir=dict(type="path", required=True),
    gpu_indices=dict(type="list", elements="int", required=True),
    gpus=dict(type="list", elements="dict"),
    gpu_requests=dict(type="bool", default=True),
    env=dict(type="dict", default={}),
    ulimits=dict(type="list", elements="str", default=[]),
    api_host=dict(type="str", default="127.0.0.1"),
    port=dict(type="int", default=8020),
    wait_timeout=dict(type="int", default=2400),
    lock_wait=dict(type="int"),
    log_tail_lines=dict(type="int", default=25),
    stop_grace=dict(type="int", default=20),
    restart_policy=dict(type="str", default="on-failure:3"),
    defer_replace=dict(type="bool", default=False),
)


def main():
    # Its action (plugins/action/engine_container.py) runs the same run_module on the host without
    # this module where the connection pipelines, outside check mode.
    run_module(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
