# -*- coding: utf-8 -*-
"""plugin_utils/box_reader.py: the program a host runs in place of a module, run here by a Python
that cannot import Ansible or the collection (-I -S: no site-packages, no PYTHONPATH), so an import
that the program does not carry fails the test."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import subprocess
import sys

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged
from ansible_collections.glm53.tensorfold.plugins.plugin_utils import box_reader

PARAMS = {"container_name": "glm53-zig", "label": "glm53.tensorfold.rank_container", "settings_hash": None,
          "image": None, "runtime": "nvidia", "weights": [], "health_url": None, "health_timeout": 1.0,
          "docker_host": "unix:///nonexistent/docker.sock", "docker_timeout": 1.0, "host_label": "box7",
          "data_dir": None, "run_settings": None, "api_key": None, "node_exporter": False}


def run_bare(text):
    proc = subprocess.run([sys.executable, "-I", "-S", "-"], input=text.encode("utf-8"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, check=False)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def test_read_box_runs_with_the_files_it_carries_and_nothing_else(tmp_path):
    # A data folder with a deploy record: read_box reads it, the key file, the log (context_fit).
    state = tmp_path / ".state"
    state.mkdir()
    (state / "deployed.json").write_text(json.dumps({"settings": "a" * 64, "container": "b" * 64}))
    (state / "api-key").write_text("sk-a-key")
    params = dict(PARAMS, data_dir=str(tmp_path), run_settings="a" * 64, api_key="sk-a-key")
    rc, out, err = run_bare(box_reader.program(converged.READER_MODULES, "read_box", params))
    assert rc == 0, err
    answer = box_reader.parse(out)
    # No Docker engine at that socket: the reader's own coded failure, not a traceback.
    assert answer["failed"] is True and answer["code"] == "E_DOCKER", answer
    assert answer["msg"].startswith("[E_DOCKER] box7: cannot read the Docker engine at unix:///nonexistent/docker.sock")


def test_a_missing_file_is_a_traceback_not_an_answer():
    rc, out, err = run_bare(box_reader.program(("converged",), "read_box", PARAMS))
    assert rc != 0 and box_reader.parse(out) is None
    assert "ModuleNotFoundError" in err or "ImportError" in err


def test_parse_takes_the_last_json_line():
    assert box_reader.parse("Welcome to the box\n{not json\n{\"a\": 1}\n\n") == {"a": 1}
    assert box_reader.parse("no answer\n") is None


class Templar:
    def template(self, value):
        return value.replace("{{ py }}", "/opt/py/bin/python3")


class Action:
    """What read() uses of an action: the pipelining test, the templar, one command."""

    def __init__(self, pipelining=True, rc=0, stdout="", stderr=""):
        self.pipelining, self.ran, self.environment = pipelining, [], ""
        self.answer = {"rc": rc, "stdout": stdout, "stderr": stderr}
        self._templar = Templar()

    def _is_pipelining_enabled(self, style):
        return self.pipelining and style == "new"

    def _compute_environment_string(self):
        return self.environment

    def _low_level_execute_command(self, command, in_data=None):
        self.ran.append((command, in_data))
        return self.answer


def test_read_runs_the_named_python_on_stdin_or_steps_aside():
    action = Action(stdout='{"converged": true}\n')
    assert box_reader.read(action, {"ansible_python_interpreter": "{{ py }}"}, ("converged",), "read_box", {}) == {
        "converged": True}
    command, in_data = action.ran[0]
    assert command == "/opt/py/bin/python3 -" and b"read_box" in in_data
    # The secret parameters travel in the program on stdin, never in the command.
    action = Action(stdout="{}")
    box_reader.read(action, {"ansible_facts": {"discovered_interpreter_python": "/usr/bin/python3.12"}},
                    ("converged",), "read_box", {"api_key": "sk-secret"})
    assert action.ran[0][0] == "/usr/bin/python3.12 -" and b"sk-secret" in action.ran[0][1]
    action = Action(stdout="{}")
    box_reader.read(action, {"ansible_python_interpreter": "auto_silent"}, ("converged",), "read_box", {})
    assert action.ran[0][0] == "python3 -"
    # The task's environment comes first, as before a module; an interpreter keeps its arguments.
    action = Action(stdout="{}")
    action.environment = "PATH=/opt/nvidia/bin:/usr/bin"
    box_reader.read(action, {"ansible_python_interpreter": "/usr/bin/env python3"}, ("converged",), "read_box", {})
    assert action.ran[0][0] == "PATH=/opt/nvidia/bin:/usr/bin /usr/bin/env python3 -"
    # A reader that must run in the modules' own Python does not guess one.
    action = Action(stdout="{}")
    assert box_reader.read(action, {"ansible_python_interpreter": "auto"}, ("x",), "f", {}, any_python=False) is None
    assert not action.ran
    # No pipelining: nothing runs, the caller runs its module; no interpreter there: the same.
    action = Action(pipelining=False)
    assert box_reader.read(action, {}, ("converged",), "read_box", {}) is None and not action.ran
    assert box_reader.read(Action(rc=127, stderr="python3: not found"), {}, ("converged",), "read_box", {}) is None
    # A program that broke: a failed answer with what it said.
    failed = box_reader.read(Action(rc=1, stderr="Traceback ...\nKeyError: 'x'"), {}, ("converged",), "read_box", {})
    assert failed["failed"] is True and failed["rc"] == 1 and "KeyError: 'x'" in failed["msg"]
