# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)
"""The few AnsibleModule methods the collection's host readers use, from the standard library: what
they run as when the box reader (plugin_utils/box_reader.py) sends them to a host's own Python in
place of a module. Their module passes the real AnsibleModule; the answer is the same.

``answer(reader, params)`` runs ``reader(module)`` and returns the module's result: what it
passed to exit_json (with the warnings), or what it passed to fail_json, failed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess

# Where Ansible's get_bin_path also looks, after PATH.
SBIN = ("/sbin", "/usr/sbin", "/usr/local/sbin")


class Exited(Exception):
    """exit_json or fail_json was called: ``result`` is the module's answer."""

    def __init__(self, result):
        super(Exited, self).__init__(result.get("msg", ""))
        self.result = result


class BoxModule(object):
    """``params`` (checked and completed on the controller), run_command, get_bin_path, warn,
    exit_json and fail_json."""

    def __init__(self, params):
        self.params = params
        self.warnings = []
        self.check_mode = False

    def run_command(self, args, environ_update=None):
        """(rc, stdout, stderr) of ``args`` (a list, no shell); a command that cannot start fails,
        as AnsibleModule.run_command does."""
        env = dict(os.environ)
        env.update(environ_update or {})
        try:
            proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
            out, err = proc.communicate()
        except OSError as exc:
            self.fail_json(msg=str(exc), rc=exc.errno, cmd=args)
        return (proc.returncode, out.decode("utf-8", "surrogateescape"), err.decode("utf-8", "surrogateescape"))

    def get_bin_path(self, name, required=False, opt_dirs=None):
        """The first executable ``name`` in opt_dirs, PATH and the sbin folders; None when absent."""
        for folder in list(opt_dirs or []) + os.environ.get("PATH", "").split(os.pathsep) + list(SBIN):
            path = os.path.join(folder, name)
            if folder and os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        if required:
            self.fail_json(msg="Failed to find required executable %s in paths: %s" % (name, os.environ.get("PATH", "")))
        return None

    def warn(self, warning):
        self.warnings.append(warning)

    def exit_json(self, **result):
        raise Exited(self._with_warnings(result))

    def fail_json(self, **result):
        raise Exited(self._with_warnings(dict(result, failed=True)))

    def _with_warnings(self, result):
        if self.warnings:
            result["warnings"] = list(self.warnings)
        return result


def answer(reader, params):
    """The answer of ``reader(module)``, a function that ends with module.exit_json or fail_json."""
    module = BoxModule(params)
    try:
        reader(module)
    except Exited as exited:
        return exited.result
    raise RuntimeError("%s returned without exit_json or fail_json" % getattr(reader, "__name__", reader))
