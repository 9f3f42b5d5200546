#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: context_fit
short_description: Work out the largest context window the engine fits, and cache it
description:
  - Reads a rank log of C(tensorfold-native) (text or a file) and says whether the engine refused
    its window with one of its memory-fit refusals, and which window fits by the engine's own figures.
  - A stream's memory grows linearly with its window, so the figures in a refusal give the cost per
    token. The engine admits a numeric O(parallel) P only when P streams fit (KV pages on or off);
    C(auto) needs one. The answer is the largest multiple of O(page_rows), not above
    O(requested_context), for which they fit the budget the refusal names, read conservatively
    from the printed two-decimal figures so that the engine really admits it.
  - A refusal split over lines (wrapped, or with another line such as NCCL's debug output in between)
    is joined back; terminal escapes are ignored. A C(--parallel P needs) refusal is answered for the
    P it names.
  - A refusal that the checkpoint's weights do not fit has no answer (RV(context) is null); report
    it as a memory error. C(--context N exceeds this model's W-token window) gives W.
  - With O(state_file) and O(key), an answer is recorded in the TSV cache; without O(log) and
    O(log_path) the module only looks O(key) up there (RV(cached)).
version_added: 0.1.0
author:
  - glm53.tensorfold contributors (@glm53)
options:
  log:
    description: The rank log text (both ranks' logs may be concatenated). Mutually exclusive with O(log_path).
    type: str
  log_path:
    description:
      - A rank log file on the host to read instead of O(log); a missing file reads as empty.
      - Only the last start's part is read, from the runner's last C(runner ... starting rank 1 and rank 0) line on,
        because the runner appends every start to the same file; that line is found also where it runs on from an
        unfinished line (a rank killed mid-line, a progress line ended by a carriage return).
    type: path
  requested_context:
    description: The window the engine was asked for, in tokens; the answer is never above it.
    type: int
    default: 1048576
  parallel:
    description: The streams asked for, a number of at least 1 or C(auto).
    type: str
    default: "4"
  kv_pages:
    description: Whether the KV cache is one shared pool of pages. Accepted for callers; it does not change the answer (the engine counts streams the same way).
    type: bool
    default: true
  page_rows:
    description: The KV page size in rows; the answer is a multiple of it.
    type: int
    default: 512
  state_file:
    description: The context-fit cache, a TSV file (C(key), C(context), recorded time) in the host's state folder.
    type: path
  key:
    description: The cache key, a fingerprint of what the fit depends on (GPU model and memory, checkpoint
      revision, image tag, PARALLEL, KV, KV_PAGES, DENSE, HEAD, VISION, DRAFTER, MEMORY_RESERVE_GIB).
    type: str
attributes:
  check_mode:
    support: full
    description: In check mode the answer is computed but the cache is not written.
  diff_mode:
    support: none
    description: Returns no diff.
notes:
  - The rule is documented in docs/rank_container.md of the collection.
"""

EXAMPLES = r"""
- name: Look the window up in the cache
  glm53.tensorfold.context_fit:
    state_file: /srv/glm53/.state/context-fit.tsv
    key: "{{ fit_key }}"
  register: fit_cached

- name: Work out the window from the refusal in rank 0's log, and record it
  glm53.tensorfold.context_fit:
    log_path: /srv/glm53/logs/current/rank0.log
    requested_context: 1048576
    parallel: "4"
    kv_pages: true
    state_file: /srv/glm53/.state/context-fit.tsv
    key: "{{ fit_key }}"
  register: fit
"""

RETURN = r"""
refused:
  description: Whether the log holds one of the engine's memory-fit refusals.
  returned: always
  type: bool
  sample: true
kind:
  description: Which refusal (C(no_stream), C(parallel), C(weights), C(window)), or null.
  returned: always
  type: str
  sample: no_stream
context:
  description: The largest window that fits by the engine's figures (or the cached one); null when none does or none is known.
  returned: always
  type: int
  sample: 694272
streams:
  description: Streams the engine serves, from its startup line; null without one.
  returned: always
  type: int
  sample: 4
window:
  description: The window of the startup line; null without one.
  returned: always
  type: int
  sample: 262144
cached:
  description: Whether RV(context) came from the cache.
  returned: always
  type: bool
  sample: false
reason:
  description: The refusal's line (joined back when it was split over lines), or an empty string.
  returned: always
  type: str
  sample: "the CUDA memory budget fits no stream: one at a 1048576-token window takes 8.00 GiB, ..."
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.glm53.tensorfold.plugins.module_utils.context_fit import (
    analyse,
    latest_run,
    parallel_problem,
    read_cache_file,
    write_cache_entry,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log=dict(type="str"),
            log_path=dict(type="path"),
            requested_context=dict(type="int", default=1048576),
            parallel=dict(type="str", default="4"),
            kv_pages=dict(type="bool", default=True),
            page_rows=dict(type="int", default=512),
            state_file=dict(type="path"),
            key=dict(type="str", no_log=False),
        ),
        mutually_exclusive=[("log", "log_path")],
        required_together=[("state_file", "key")],
        supports_check_mode=True,
    )
    params = module.params
    if params["page_rows"] < 1:
        module.fail_json(msg="page_rows must be at least 1")
    bad_parallel = parallel_problem(params["parallel"])
    if bad_parallel:
        module.fail_json(msg=bad_parallel)
    parallel = params["parallel"].strip().lower()

    result = dict(changed=False, refused=False, kind=None, context=None, streams=None,
                  window=None, cached=False, reason="")
    has_log = params["log"] is not None or params["log_path"] is not None
    if not has_log:
        if params["state_file"]:
            entries = read_cache_file(params["state_file"])[0]
            if params["key"] in entries:
                result.update(context=entries[params["key"]], cached=True)
        module.exit_json(**result)

    text = params["log"]
    if text is None:
        text = ""
        if os.path.exists(params["log_path"]):
            with open(params["log_path"], errors="replace") as handle:
                text = latest_run(handle.read())
    found = analyse(text, params["requested_context"], parallel, params["kv_pages"], params["page_rows"])
    result.update(found)
    if found["refused"] and found["context"] is not None and params["state_file"]:
        if module.check_mode:
            entries = read_cache_file(params["state_file"])[0]
            result["changed"] = entries.get(params["key"]) != found["context"]
        else:
            result["changed"] = write_cache_entry(params["state_file"], params["key"], found["context"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
