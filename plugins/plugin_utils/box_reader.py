# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""Run a function of the collection's module_utils on the host with the host's python3, without
AnsiballZ.

A module run costs the host a Python start, AnsiballZ's unpacking and the compile of
ansible.module_utils.basic and its helpers from source: about 0.25 s of CPU in every run, on every
host. A reader that needs only the standard library and a few of the collection's module_utils
files (the fast path's converged.read_box) is sent instead as one small program on standard input,
the way a pipelined module is sent (the same connection, the same become), and imports those files
from memory: about a quarter of the cost. Where that way is closed (no pipelining, a path the host
must expand, no python3 on the host) ``read_or_run`` runs the module, which calls the same function.
The readers: converged.read_box (converged_info), nvidia_smi_command.gpu_info_on_box (gpu_info),
host_resources.on_box (host_resources, under gpu_host_verdict), and one that changes the host,
engine_container.on_box (engine_container, outside check mode: a restart pays for one module start
the less); module_utils/box_module.py stands for AnsibleModule in the last three.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shlex

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values

PACKAGE = "ansible_collections.glm53.tensorfold.plugins.module_utils"
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")

# The program the host runs: an importer for the files sent with it, then one call whose answer is
# printed as one JSON line. An exception with a ``code`` (the reader's own failure) is an answer
# too, a failed one; anything else ends the program with its traceback on stderr.
# Compiling the files costs the host about as much as a seventh of the whole read, so each file's
# code is kept in the user's cache folder under the digest of its source and the host Python's
# bytecode version; a missing, unreadable or damaged copy is compiled again and the copy replaced
# (the stale ones of that file go), and a folder that cannot be written only costs the compile.
PROGRAM = """
import importlib, json, marshal, os, sys
from importlib.machinery import ModuleSpec
from importlib.util import MAGIC_NUMBER
SOURCES = json.loads(%(sources)r)
DIGESTS = json.loads(%(digests)r)
PACKAGE = %(package)r
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), %(cache)r)
def code_of(name):
    stem = "%%s.%%s.%%s-%%s" %% (name, DIGESTS[name], sys.implementation.cache_tag, MAGIC_NUMBER.hex())
    path = os.path.join(CACHE, stem + ".code")
    try:
        with open(path, "rb") as handle:
            return marshal.loads(handle.read())
    except Exception:
        pass
    code = compile(SOURCES[name], name.replace(".", "/") + ".py", "exec")
    try:
        os.makedirs(CACHE, mode=0o700, exist_ok=True)
        for other in os.listdir(CACHE):
            if other.startswith(name + ".") and other != stem + ".code":
                os.unlink(os.path.join(CACHE, other))
        with open(path + ".%%d" %% os.getpid(), "wb") as handle:
            handle.write(marshal.dumps(code))
        os.replace(path + ".%%d" %% os.getpid(), path)
    except OSError:
        pass
    return code
class Importer(object):
    def find_spec(self, name, path=None, target=None):
        if name in SOURCES or (PACKAGE + ".").startswith(name + "."):
            return ModuleSpec(name, self, is_package=name not in SOURCES)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        if module.__name__ in SOURCES:
            exec(code_of(module.__name__), module.__dict__)
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

# Where on the host, under the user's cache folder, the files' compiled code is kept.
CACHE_FOLDER = "glm53.tensorfold/box-reader"

_SOURCES = {}


def _sources(names):
    """({dotted name: source}, {dotted name: its digest}) of these module_utils files, read once per
    process."""
    key = tuple(names)
    if key not in _SOURCES:
        found, digests = {}, {}
        for name in names:
            with open(os.path.join(MODULE_UTILS, name + ".py"), "rb") as handle:
                source = handle.read()
            dotted = "%s.%s" % (PACKAGE, name)
            found[dotted] = source.decode("utf-8")
            digests[dotted] = hashlib.sha256(source).hexdigest()[:20]
        _SOURCES[key] = (found, digests)
    return _SOURCES[key]


def program(names, function, params):
    """The program that runs ``names[0].function(params)`` on the host (``names``: every module_utils
    file it imports, itself first)."""
    sources, digests = _sources(names)
    return PROGRAM % {"sources": json.dumps(sources), "digests": json.dumps(digests), "package": PACKAGE,
                      "cache": CACHE_FOLDER, "module": "%s.%s" % (PACKAGE, names[0]), "function": function,
                      "params": json.dumps(params)}


def interpreter(action, task_vars, any_python=True):
    """The host's Python: ansible_python_interpreter when it names one, else the one discovered
    earlier in this run, else (``any_python``) python3 from the PATH, else None."""
    named = task_vars.get("ansible_python_interpreter")
    if named:
        named = action._templar.template(named)  # pylint: disable=protected-access  # ActionBase's templar
    if not named or str(named).startswith("auto"):
        named = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python") or ("python3" if any_python else None)
    return None if named is None else str(named)


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


def read(action, task_vars, names, function, params, any_python=True):
    """The reader's answer from the host, or None when this way is closed and the caller must run
    its module. ``params``: the function's parameters, checked and completed on the controller.
    ``any_python``: any python3 will do (else only the one Ansible's modules use on the host)."""
    python = interpreter(action, task_vars, any_python)
    if python is None or not action._is_pipelining_enabled("new"):  # pylint: disable=protected-access  # ActionBase's own test
        return None
    # The task's `environment` goes first, as the shell plugin puts it before a module's command;
    # an interpreter with arguments (/usr/bin/env python3) keeps them.
    command = " ".join([action._compute_environment_string()]  # pylint: disable=protected-access
                       + [shlex.quote(part) for part in shlex.split(python)] + ["-"]).strip()
    ran = action._low_level_execute_command(command, in_data=program(names, function, params).encode("utf-8"))  # pylint: disable=protected-access
    if ran["rc"] in NO_INTERPRETER:
        return None
    answer = parse(ran.get("stdout"))
    if ran["rc"] != 0 or not isinstance(answer, dict):
        return {"failed": True, "rc": ran["rc"],
                "msg": "the reader %s.%s failed on the host (rc %s): %s" % (
                    names[0], function, ran["rc"], (ran.get("stderr") or ran.get("stdout") or "").strip()[-2000:])}
    return answer


def path_values(spec, args):
    """Every value of ``args`` that ``spec`` types as a path, suboptions included."""
    found = []
    for name, option in spec.items():
        value = (args or {}).get(name)
        if value is None:
            continue
        if option.get("type") == "path" or option.get("elements") == "path":
            found.extend(value if isinstance(value, list) else [value])
        elif option.get("options"):
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    found.extend(path_values(option["options"], item))
    return found


def read_or_run(action, task_vars, module_name, spec, args, names, function, any_python=True, reader=True):
    """The answer of module ``module_name`` (options ``spec``) for ``args``: from the box reader
    (``names[0].function`` on the checked options) where it can run, else from the module itself,
    which also reports bad options and expands a path that holds ``~`` or ``$`` on the host.
    ``read_with`` says which of the two answered. ``any_python``: as for ``read``; ``reader``:
    False leaves it to the module. The options marked no_log are masked in the reader's answer,
    as AnsibleModule masks them in a module's."""
    checked = ArgumentSpecValidator(spec).validate(args)
    answer = None
    if reader and not checked.error_messages and not any(
            "~" in value or "$" in value for value in path_values(spec, args) if isinstance(value, str)):
        answer = read(action, task_vars, names, function, checked.validated_parameters, any_python)
    if answer is None:
        answer = action._execute_module(module_name=module_name, module_args=args, task_vars=task_vars)  # pylint: disable=protected-access
        answer["read_with"] = "module"
    else:
        answer = remove_values(answer, checked._no_log_values)  # pylint: disable=protected-access  # the validator's own record
        answer["read_with"] = "box reader"
    return answer
