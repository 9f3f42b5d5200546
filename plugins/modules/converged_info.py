#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: converged_info
short_description: Say in one call whether a box already serves what the run wants, and what differs
version_added: 0.2.0
description:
  - Compares what the box has with what the run wants and returns RV(converged) and, when it is
    not, RV(differs), one entry per part that differs, so a run can skip every step for a box that
    is already converged and take the normal way for one that is not.
  - "The parts: C(container) (the container named O(container_name) exists, carries the label
    O(label)=true and runs), C(settings) (its O(label).settings label equals O(settings_hash), the
    fingerprint the glm53.tensorfold.rank_container role computes), C(image) (O(image) is present in
    the box's Docker engine and is the image the container runs), C(weights) (every planned file of
    every repository in O(weights) has a verification record of M(glm53.tensorfold.hf_snapshot) that
    still holds: same revision, size and modification time; no weight byte is read), C(runtime)
    (Docker lists the runtime O(runtime)) and C(health) (GET O(health_url) answers 200 with C({\"status\": \"ok\"}) within
    O(health_timeout) seconds; an engine still loading may answer 200 with another status)."
  - "With O(data_dir), the wanted container fingerprint, image, weights and health URL are those
    of the box's deploy record (C(DATA_DIR/.state/deployed.json), written by the
    glm53.tensorfold.rank_container role once a full run's smoke test passed), and the part
    C(record) compares O(run_settings) with the fingerprint recorded there; C(api_key) compares
    O(api_key) with the key file the engine reads."
  - A part whose wanted value is not given is not compared.
  - "With O(node_exporter), it also says whether the node exporter the glm53.tensorfold.monitoring
    role left on the box (its record C(DATA_DIR/.state/node-exporter.json) holds its URL) still
    serves the series that names O(data_dir) (RV(node_exporter)); that answer does not count toward
    RV(converged): site.yml's monitoring step reads it alone."
  - Only reads; it never changes the box, so check mode gives the same answer.
  - Talks to the Docker Engine API over its unix socket (three GETs at most) and to the API once.
author:
  - glm53.tensorfold contributors (@glm53)
options:
  container_name:
    description: The container that serves the model.
    type: str
    default: glm53-zig
  label:
    description: The label that marks the container as the collection's (its C(.settings) suffix holds the fingerprint).
    type: str
    default: glm53.tensorfold.rank_container
  settings_hash:
    description: The settings fingerprint the run wants (the role's C(rank_container_settings_hash)); not compared when unset.
    type: str
  image:
    description: The image reference the run wants, C(NAME:TAG); not compared when unset.
    type: str
  runtime:
    description: A Docker runtime the container needs (for example C(nvidia)); not compared when unset.
    type: str
  weights:
    description:
      - The repositories the box must hold, as the glm53.tensorfold.weights_fetch role plans them.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: A short name for messages (default the folder's name).
        type: str
      revision:
        description: The pinned 40-hex commit.
        type: str
        required: true
      local_dir:
        description: The folder the files are in.
        type: path
        required: true
      state_dir:
        description: The M(glm53.tensorfold.hf_snapshot) state folder of that repository.
        type: path
        required: true
      allow_patterns:
        description: Only paths matching one of these globs count.
        type: list
        elements: str
  data_dir:
    description: The box's data folder (C(tensorfold_data_dir)); its deploy record says what a converged box has.
    type: path
  run_settings:
    description:
      - The run's settings fingerprint (the fact C(tensorfold_settings_fingerprint) of
        M(glm53.tensorfold.settings_check)); compared with the deploy record's. Only with O(data_dir).
    type: str
  api_key:
    description: The run's API key; compared with the key file in O(data_dir) (empty, no key file wanted). Only with O(data_dir).
    type: str
  health_url:
    description:
      - The API's health URL on the box, for example C(http://127.0.0.1:8020/health); not asked when unset.
      - Asked directly, never through a proxy from the environment, with no redirect followed.
    type: str
  health_timeout:
    description: Seconds the health request may take.
    type: float
    default: 2.0
  docker_host:
    description: The Docker engine's socket.
    type: str
    default: unix:///var/run/docker.sock
  docker_timeout:
    description: Seconds each Docker API request may take.
    type: float
    default: 5.0
  host_label:
    description:
      - The host name used in problem messages.
      - Default the host's inventory name (the action fills it in, for each host of O(hosts) too).
    type: str
  node_exporter:
    description:
      - Whether the run wants the node exporter on the box (the inventory has a C(monitoring) group); only with O(data_dir).
      - Its metrics must hold the series C(glm53_data_dir_info) with the label C(path) equal to O(data_dir).
    type: bool
    default: false
  hosts:
    description:
      - Read each of these inventory hosts instead of the one the task runs on, each with its own
        variables, connection and become, as if it ran the task itself; the answers come back
        under RV(boxes). For a task with C(run_once), as the fast path of C(site.yml) uses it, so
        that a converged fleet costs the controller one worker for the whole batch, not one per box.
      - The task's conditions are judged once, for the batch; each host's arguments are templated
        with its own variables.
      - Handled by the action plugin, which runs the read of each host in threads of the one worker
        through ansible-core's own task executor (ansible-core 2.19 and later). Where that is not
        possible, RV(boxes) holds only the answer of the host the task runs on, and the other hosts
        take the normal way of a box that is not converged.
    type: list
    elements: str
notes:
  - Read the RV(differs) list rather than RV(converged) alone when deciding which steps to run.
  - A host read through O(hosts) has no result of its own, so the PLAY RECAP of a run where it
    did nothing else does not list it.
extends_documentation_fragment:
  - glm53.tensorfold.read_only.box_reader
attributes:
  check_mode:
    description: Can run in check_mode and return the same answer.
    support: full
  diff_mode:
    description: Nothing is changed, so there is no diff.
    support: none
"""

EXAMPLES = r"""
- name: Is this box already serving what the run wants?
  glm53.tensorfold.converged_info:
    settings_hash: "{{ rank_container_settings_hash }}"
    image: "{{ tensorfold_image_ref }}"
    runtime: nvidia
    weights: "{{ weights_fetch_repos }}"
    health_url: "http://127.0.0.1:{{ tensorfold_port }}/health"
  register: box

- name: Show what differs
  ansible.builtin.debug:
    msg: "{{ box.summary }}"
  when: not box.converged
"""

RETURN = r"""
boxes:
  description: With O(hosts), each host's answer (the return values below, or a failed result), by inventory name.
  returned: with O(hosts)
  type: dict
  sample: {"gpu-a": {"converged": true, "summary": "converged"}}
converged:
  description: True when no compared part differs.
  returned: without O(hosts)
  type: bool
  sample: false
differs:
  description: One entry per part that differs, in the order container, settings, image, weights, runtime, health.
  returned: without O(hosts)
  type: list
  elements: dict
  sample: [{"part": "settings", "what": "settings fingerprint 0c1d2e3f4a5b, wanted 9f8e7d6c5b4a"}]
lacks:
  description:
    - Which of C(image) and C(weights) the box must be given before it can serve, those of RV(differs) and both on a box
      without a deploy record (with O(data_dir)), so a run can let a converged box lend them.
  returned: without O(hosts)
  type: list
  elements: str
  sample: ["image", "weights"]
verified_weights:
  description:
    - The repositories of the deploy record (or of O(weights)) the box holds whole, each as given (a listing recorded and
      every planned file verified). Also on a box that differs in other parts, so that a run whose repositories are all
      among them fetches nothing there.
  returned: without O(hosts)
  type: list
  elements: dict
  sample: [{"name": "model", "revision": "0123456789abcdef0123456789abcdef01234567", "local_dir": "/srv/glm53/model",
            "state_dir": "/srv/glm53/.state/weights/model"}]
summary:
  description: One line for the operator, C(converged) or C(differs:) and the parts.
  returned: without O(hosts)
  type: str
have:
  description: What was read on the box.
  returned: without O(hosts)
  type: dict
  contains:
    container:
      description: The container's id, name, image_id, image_ref, running, status, ours and settings; null when absent.
      type: dict
    image:
      description: The wanted image's id and tags; null when absent or not asked.
      type: dict
    weights:
      description: Per repository, its name, revision, number of planned files, the unverified ones, and a problem when its state is unreadable.
      type: list
      elements: dict
    runtimes:
      description: Docker's runtimes; null when not asked.
      type: list
      elements: str
    health:
      description: ok, status and error of the health request; null when not asked or the container does not run.
      type: dict
served:
  description: The running engine's context window and streams, from its startup line (only with O(data_dir)).
  returned: without O(hosts)
  type: dict
  sample: {"context": 1048576, "streams": 4}
record:
  description: The box's deploy record (no secret in it), or null when there is none or O(data_dir) is unset.
  returned: without O(hosts)
  type: dict
published:
  description:
    - On a converged box (with O(data_dir)), the facts its skipped deploy steps would have set, from its deploy record
      (C(rank_container_result), C(smoke_test_result), C(gpu_host_checks_result), C(tensorfold_image_ref),
      C(tensorfold_image_tag), C(weights_fetch_model_revision)); null otherwise. The collection's controller-side
      readers of those facts take them from here.
  returned: without O(hosts)
  type: dict
read_with:
  description: How the box was read, C(box reader) (its Python ran the comparison, no AnsiballZ) or C(module).
  returned: without O(hosts)
  type: str
  sample: box reader
node_exporter:
  description: Whether the node exporter serves the data folder's series (C(converged)) and, when not, why (C(what)); null when O(node_exporter) is false.
  returned: without O(hosts)
  type: dict
  sample: {"converged": true, "what": ""}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged

ARGUMENT_SPEC = dict(
    container_name=dict(type="str", default="glm53-zig"),
    label=dict(type="str", default="glm53.tensorfold.rank_container"),
    settings_hash=dict(type="str"),
    image=dict(type="str"),
    runtime=dict(type="str"),
    weights=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str"),
        revision=dict(type="str", required=True),
        local_dir=dict(type="path", required=True),
        state_dir=dict(type="path", required=True),
        allow_patterns=dict(type="list", elements="str"),
    )),
    health_url=dict(type="str"),
    health_timeout=dict(type="float", default=2.0),
    docker_host=dict(type="str", default="unix:///var/run/docker.sock"),
    docker_timeout=dict(type="float", default=5.0),
    host_label=dict(type="str"),
    data_dir=dict(type="path"),
    run_settings=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    node_exporter=dict(type="bool", default=False),
    hosts=dict(type="list", elements="str"),  # the action's (read each of them); the read itself ignores it
)


def main():
    # The action (plugins/action/converged_info.py) runs converged.read_box on the box without this
    # module where it can; this module is its way where it cannot, and the same answer.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        module.exit_json(**converged.read_box(module.params))
    except converged.ReadFailure as failure:
        module.fail_json(msg=str(failure), code=failure.code)


if __name__ == "__main__":
    main()
