# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""load_test hands the API key to aiperf with neither its command line nor its environment holding
it (both readable in /proc by the same user and by root for the whole run)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys

from ansible_collections.glm53.tensorfold.plugins.modules import load_test

KEY = "sk-canary-load-test"

# A stand-in aiperf package: its app() records what the process was given and what it can be read from.
FAKE_CLI = '''
import json, os, sys
def app():
    with open(os.environ["RECORD"], "w") as handle:
        json.dump({"argv": sys.argv, "environ": open("/proc/self/environ", "rb").read().decode("latin-1"),
                   "cmdline": open("/proc/self/cmdline", "rb").read().decode("latin-1"),
                   "fds": sorted(os.listdir("/proc/self/fd"))}, handle)
    return 0
'''


CASE = {"name": "decode", "prompt_tokens": 16, "reply_tokens": 8, "streams": 1, "requests": 1, "max_seconds": 30}


def aiperf_standin(tmp_path, monkeypatch):
    """The aiperf path of a venv whose Python imports the stand-in package; its record's path."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (tmp_path / "lib" / "aiperf").mkdir(parents=True)
    (tmp_path / "lib" / "aiperf" / "__init__.py").write_text("")
    (tmp_path / "lib" / "aiperf" / "cli.py").write_text(FAKE_CLI)
    python = venv / "python"
    python.write_text("#!/bin/sh\nexec %s \"$@\"\n" % sys.executable)
    python.chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "lib"))
    monkeypatch.setenv("RECORD", str(tmp_path / "record.json"))
    return str(venv / "aiperf"), tmp_path / "record.json"


def test_the_key_reaches_aiperf_through_neither_its_command_line_nor_its_environment(tmp_path, run_module, monkeypatch):
    aiperf, record_path = aiperf_standin(tmp_path, monkeypatch)
    result = run_module(load_test, url="http://127.0.0.1:9", tokenizer=str(tmp_path), aiperf=aiperf,
                        cases=[CASE], artifact_dir=str(tmp_path / "out"), api_key=KEY)
    assert result["failed"] and "left no readable export" in result["msg"]  # the stand-in writes none
    record = json.loads(record_path.read_text())
    assert record["argv"][-2:] == ["--api-key", KEY] and record["argv"][:2] == ["aiperf", "profile"]
    assert KEY not in record["cmdline"] and KEY not in record["environ"] and KEY not in json.dumps(result)


def test_without_a_key_no_pipe_and_no_key_argument(tmp_path, run_module, monkeypatch):
    aiperf, record_path = aiperf_standin(tmp_path, monkeypatch)
    run_module(load_test, url="http://127.0.0.1:9", tokenizer=str(tmp_path), aiperf=aiperf, cases=[CASE],
               artifact_dir=str(tmp_path / "out"))
    record = json.loads(record_path.read_text())
    assert "--api-key" not in record["argv"] and "GLM53_BENCH_API_KEY_FD" not in record["environ"]
