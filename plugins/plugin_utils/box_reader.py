# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Run a read-only function of the collection's module_utils on the host with the host's python3,
without AnsiballZ.

A module run costs the host a Python start, AnsiballZ's unpacking and the compile of
ansible.module_utils.basic and its helpers from source: about 0.25 s of CPU in every run, on every
host. A reader that needs only the standard library and a few of the collection's module_utils
files (the fast path's converged.read_box) is sent instead as one small program on standard input,
the way a pipelined module is sent (the same connection, the same become), and imports those files
from memory: a tenth of the cost. Where that way is closed (no pipelining, a path the host must
expand, no python3 on the host) ``read`` answers None and the caller runs its module, which calls
the same function.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex

PACKAGE = "ansible_collections.glm53.tensorfold.plugins.module_utils"
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")

# The program the host runs: an importer for the files sent with it, then one call whose answer is
# printed as one JSON line. An exception with a ``code`` (the reader's own failure) is an answer
# too, a failed one; anything else ends the program with its traceback on stderr.
PROGRAM = """
import importlib.util, json, sys
SOURCES = json.loads(%(sources)r)
PACKAGE = %(package)r
class Importer(object):
    def find_spec(self, name, path=None, target=None):
        if name in SOURCES or (PACKAGE + ".").startswith(name + "."):
            return importlib.util.spec_from_loader(name, self, is_package=name not in SOURCES)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        if module.__name__ in SOURCES:
            exec(compile(SOURCES[module.__name__], module.__name__.replace(".", "/") + ".py", "exec"), module.__dict__)
sys.meta_path.insert(0, Importer())
reader = importlib.import_module(%(module)r)
try:
    answer = getattr(reader, %(function)r)(json.loads(%(params)r))
except Exception as exc:
    if not getattr(exc, "code", None):
        raise
    answer = {"failed": True, "msg": str(exc), "code": exc.code}
sys.stdout.write("\\n" + json.dumps(answer) + "\\n")
"""

# Exit statuses of a shell that could not run the interpreter (not found, not executable).
NO_INTERPRETER = (126, 127)

_SOURCES = {}


def _sources(names):
    """{dotted name: source} of these module_utils files, read once per process."""
    key = tuple(names)
    if key not in _SOURCES:
        found = {}
        for name in names:
            with open(os.path.join(MODULE_UTILS, name + ".py")) as handle:
                found["%s.%s" % (PACKAGE, name)] = handle.read()
        _SOURCES[key] = found
    return _SOURCES[key]


def program(names, function, params):
    """The program that runs ``names[0].function(params)`` on the host (``names``: every module_utils
    file it imports, itself first)."""
    return PROGRAM % {"sources": json.dumps(_sources(names)), "package": PACKAGE,
                      "module": "%s.%s" % (PACKAGE, names[0]), "function": function, "params": json.dumps(params)}


def interpreter(action, task_vars):
    """The host's Python: ansible_python_interpreter when it names one, else the one discovered
    earlier in this run, else python3 from the PATH (the reader needs only the standard library)."""
    named = task_vars.get("ansible_python_interpreter")
    if named:
        named = action._templar.template(named)  # pylint: disable=protected-access  # ActionBase's templar
    if not named or str(named).startswith("auto"):
        named = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python") or "python3"
    return str(named)


def parse(stdout):
    """The last line of ``stdout`` that is a JSON object (a login banner may come before it)."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def read(action, task_vars, names, function, params):
    """The reader's answer from the host, or None when this way is closed and the caller must run
    its module. ``params``: the function's parameters, checked and completed on the controller."""
    if not action._is_pipelining_enabled("new"):  # pylint: disable=protected-access  # ActionBase's own test
        return None
    command = "%s -" % shlex.quote(interpreter(action, task_vars))
    ran = action._low_level_execute_command(command, in_data=program(names, function, params).encode("utf-8"))  # pylint: disable=protected-access
    if ran["rc"] in NO_INTERPRETER:
        return None
    answer = parse(ran.get("stdout"))
    if ran["rc"] != 0 or not isinstance(answer, dict):
        return {"failed": True, "rc": ran["rc"],
                "msg": "the reader %s.%s failed on the host (rc %s): %s" % (
                    names[0], function, ran["rc"], (ran.get("stderr") or ran.get("stdout") or "").strip()[-2000:])}
    return answer
