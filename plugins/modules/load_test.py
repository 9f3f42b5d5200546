#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: load_test
short_description: Measure one OpenAI-compatible endpoint with aiperf, case by case
description:
  - Runs the load tool aiperf (from its own virtual environment) against one endpoint, once per
    case, each case bounded by a request count and a time limit, and reads each run's JSON export
    back into figures (time to first token p50/p99, tokens a second per stream and in total,
    prompt tokens a second).
  - Each case's export stays in its own folder under O(artifact_dir).
  - Meant to run on the controller (C(delegate_to localhost)); the figures are a measurement,
    never a change.
version_added: 0.2.0
author:
  - glm53.tensorfold contributors (@glm53)
options:
  url:
    description: The endpoint's base URL, C(http://HOST:PORT).
    type: str
    required: true
  model:
    description: The served model's id.
    type: str
    default: GLM-5.3-Flash
  tokenizer:
    description: A folder holding the checkpoint's C(tokenizer.json) (and C(tokenizer_config.json)).
    type: path
    required: true
  aiperf:
    description: The C(aiperf) program (in its own virtual environment).
    type: path
    required: true
  cases:
    description:
      - The cases, each a dict with C(name), C(streams) (concurrent requests), C(prompt_tokens),
        C(reply_tokens), C(requests) (how many in all) and C(max_seconds) (a time limit).
    type: list
    elements: dict
    required: true
  artifact_dir:
    description: Folder on the controller for the exports, one subfolder per case.
    type: path
    required: true
  api_key:
    description: The endpoint's API key; handed to the tool through an inherited pipe, never on a command line or
      in its environment.
    type: str
  extra_inputs:
    description: Fields added to every request (a fixed reply length needs the engine to ignore its end token).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: In check mode nothing is sent; the cases are returned as planned.
  diff_mode:
    support: none
    description: Returns no diff.
notes:
  - docs/bench.md of the collection says why aiperf, and what each case measures.
"""

EXAMPLES = r"""
- name: Measure a box
  glm53.tensorfold.load_test:
    url: http://gpu1:8020
    tokenizer: /srv/bench/tokenizer
    aiperf: /srv/bench/venv/bin/aiperf
    artifact_dir: reports/bench/gpu1
    cases:
      - {name: decode_1, streams: 1, prompt_tokens: 512, reply_tokens: 256, requests: 8, max_seconds: 120}
  delegate_to: localhost
"""

RETURN = r"""
cases:
  description: Each case's figures by name (requests, errors, ttft_p50_ms, ttft_p99_ms, per_stream, total, prefill).
  returned: success
  type: dict
exports:
  description: Each case's export folder by name.
  returned: success
  type: dict
"""

import os
import shutil
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.glm53.tensorfold.plugins.module_utils.fleet_bench import (
    aiperf_command, read_aiperf_dir)

KEY_FD_ENV = "GLM53_BENCH_API_KEY_FD"
# aiperf takes the key only as --api-key (or in a full config file). So aiperf is started from its
# own venv's Python with this launcher, which reads the key from a pipe it inherits (the variable
# names the pipe's descriptor, not the key) and adds it to its argv inside the process: neither
# its command line (/proc/PID/cmdline) nor its environment (/proc/PID/environ) holds the key.
LAUNCHER = ("import os, sys; fd = os.environ.pop('%s', ''); key = os.read(int(fd), 65536).decode() if fd else ''; "
            "fd and os.close(int(fd)); from aiperf.cli import app; sys.argv = ['aiperf'] + sys.argv[1:]"
            " + (['--api-key', key] if key else []); raise SystemExit(app())" % KEY_FD_ENV)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", default="GLM-5.3-Flash"),
            tokenizer=dict(type="path", required=True),
            aiperf=dict(type="path", required=True),
            cases=dict(type="list", elements="dict", required=True),
            artifact_dir=dict(type="path", required=True),
            api_key=dict(type="str", no_log=True),
            extra_inputs=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if module.check_mode:
        module.exit_json(changed=False, cases={}, exports={}, planned=[c.get("name") for c in params["cases"]])
    env = dict(os.environ)
    env.pop(KEY_FD_ENV, None)
    python = os.path.join(os.path.dirname(params["aiperf"]), "python")
    # aiperf keeps its dataset's memory-mapped files under the temp folder and leaves an empty
    # aiperf_mmap_* folder there after every run: a scratch folder of this run holds them instead.
    scratch = tempfile.mkdtemp(prefix="glm53-load-test-")
    env["AIPERF_DATASET_MMAP_BASE_PATH"] = scratch
    try:
        figures, exports = measure(module, params, env, python)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    module.exit_json(changed=False, cases=figures, exports=exports)


def measure(module, params, env, python):
    """Run aiperf once per case: each case's figures and export folder, by case name."""
    figures, exports = {}, {}
    for case in params["cases"]:
        folder = os.path.join(params["artifact_dir"], case["name"])
        os.makedirs(folder, exist_ok=True)
        argv = aiperf_command(params["aiperf"], params["url"], params["model"], params["tokenizer"], case, folder,
                              params["extra_inputs"])
        argv = [python, "-c", LAUNCHER] + argv[1:]
        limit = int(case["max_seconds"]) + 180  # the tool's own start-up and grace period
        key_fd = None
        if params["api_key"]:
            key_fd, writer = os.pipe()
            os.write(writer, params["api_key"].encode())  # a key fits the pipe's buffer: no reader needed yet
            os.close(writer)
        try:
            done = subprocess.run(argv, env=dict(env, **({KEY_FD_ENV: str(key_fd)} if key_fd is not None else {})),
                                  cwd=folder, capture_output=True, text=True, timeout=limit, check=False,
                                  pass_fds=(key_fd,) if key_fd is not None else ())
        except subprocess.TimeoutExpired:
            module.fail_json(msg="aiperf ran past %d s on case %s against %s" % (limit, case["name"], params["url"]))
        finally:
            if key_fd is not None:
                os.close(key_fd)
        with open(os.path.join(folder, "aiperf-output.txt"), "w") as handle:
            handle.write(done.stdout + done.stderr)
        if done.returncode != 0:
            module.fail_json(msg="aiperf failed (exit %d) on case %s against %s: %s" % (
                done.returncode, case["name"], params["url"], (done.stdout + done.stderr)[-1500:]))
        try:
            figures[case["name"]] = read_aiperf_dir(folder, case)
        except (OSError, ValueError) as err:
            module.fail_json(msg="aiperf left no readable export for case %s: %s" % (case["name"], to_native(err)))
        exports[case["name"]] = folder
    return figures, exports


if __name__ == "__main__":
    main()
