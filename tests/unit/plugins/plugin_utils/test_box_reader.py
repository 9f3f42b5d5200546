# -*- coding: utf-8 -*-
"""plugin_utils/box_reader.py: the program a host runs in place of a module, run here by a Python
that cannot import Ansible or the collection (-I -S: no site-packages, no PYTHONPATH), so an import
that the program does not carry fails the test."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from ansible_collections.glm53.tensorfold.plugins.module_utils import converged, engine_container, smoke
from ansible_collections.glm53.tensorfold.plugins.modules.engine_container import ARGUMENT_SPEC as ENGINE_SPEC
from ansible_collections.glm53.tensorfold.plugins.modules.engine_smoke import ARGUMENT_SPEC as SMOKE_SPEC
from ansible_collections.glm53.tensorfold.plugins.plugin_utils import box_reader

PARAMS = {"container_name": "glm53-zig", "label": "glm53.tensorfold.rank_container", "settings_hash": None,
          "image": None, "runtime": "nvidia", "weights": [], "health_url": None, "health_timeout": 1.0,
          "docker_host": "unix:///nonexistent/docker.sock", "docker_timeout": 1.0, "host_label": "box7",
          "data_dir": None, "run_settings": None, "api_key": None, "node_exporter": False}


# The program keeps compiled code in the user's cache folder: the tests' own, not this machine's.
CACHE_HOME = tempfile.mkdtemp(prefix="glm53-box-reader-test-")
atexit.register(shutil.rmtree, CACHE_HOME, True)


def run_bare(text, env=None):
    env = dict(os.environ if env is None else env)
    env.setdefault("XDG_CACHE_HOME", CACHE_HOME)
    proc = subprocess.run([sys.executable, "-I", "-S", "-"], input=text.encode("utf-8"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60, check=False, env=env)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def test_read_box_runs_with_the_files_it_carries_and_nothing_else(tmp_path):
    # A data folder with a deploy record: read_box reads it, the key file, the log (engine_log).
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


def test_the_fast_path_read_imports_only_what_it_uses(tmp_path):
    # The read runs on every box in every run: the engine's log is read for its startup line
    # (engine_log), not with the context fit's arithmetic and cache (context_fit, fractions, tempfile).
    state = tmp_path / ".state"
    state.mkdir()
    (state / "deployed.json").write_text(json.dumps({"settings": "a" * 64, "container": "b" * 64}))
    (tmp_path / "logs" / "current").mkdir(parents=True)
    (tmp_path / "logs" / "current" / "rank0.log").write_text(
        "CUDA sm_120 device 0 (card): model 84.50 GiB; 4 streams at once, 1.00 GiB each at a 131072-token window, "
        "of 5.3 GiB left after a 4.0 GiB reserve; prompts in 2048-row chunks\n")
    params = dict(PARAMS, data_dir=str(tmp_path), run_settings="a" * 64)
    program = box_reader.program(converged.READER_MODULES, "read_box", params)
    rc, out, err = run_bare(program + "\nprint(json.dumps(sorted(sys.modules)))\n")
    assert rc == 0, err
    imported = json.loads(out.strip().splitlines()[-1])
    assert box_reader.parse("\n".join(out.strip().splitlines()[:-1]))["code"] == "E_DOCKER"
    assert not [name for name in imported if name.endswith(".context_fit") or name in ("fractions", "decimal", "tempfile")], imported
    # Docker's API and /health are read with a socket (net.unix_get, net.http_get): no http.client,
    # whose import (email, ssl) cost the read about a quarter of its run; and no hashlib (its
    # OpenSSL library), which only a download uses.
    assert not [name for name in imported if name in ("http.client", "ssl", "hashlib") or name.startswith("email")], imported
    # Nor socket.py (its enums), urllib.parse (with ipaddress) or the IDNA codec: about 8 ms of the
    # box's CPU a read (module_utils/net.py's note); the read goes through _socket.
    assert not [name for name in imported if name in ("socket", "urllib.parse", "ipaddress", "encodings.idna")], imported


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


ENGINE_ARGS = {"state": "stopped", "host": "box7", "settings": {}, "context": "auto", "api_key": "sk-never-shown",
               "data_dir": "/srv/glm53", "model_dir": "/srv/glm53/model", "cache_dir": "/srv/glm53/cache",
               "gpu_indices": [0, 1]}


def test_the_engine_container_flow_runs_with_the_files_it_carries_and_nothing_else(tmp_path):
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    params = ArgumentSpecValidator(ENGINE_SPEC).validate(dict(ENGINE_ARGS, data_dir=str(tmp_path))).validated_parameters
    # No docker command on this PATH: the flow's own coded failure, from the host's Python alone.
    rc, out, err = run_bare(box_reader.program(engine_container.READER_MODULES, "on_box", params),
                            env={"PATH": str(tmp_path)})
    assert rc == 0, err
    answer = box_reader.parse(out)
    assert answer["failed"] is True and answer["code"] == "E_DOCKER", answer
    assert answer["msg"].startswith("[E_DOCKER] box7: the docker command is not on this host."), answer
    # A docker that has no such container: the stop is done, nothing changed.
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\necho 'Error: No such object: glm53-zig' >&2\nexit 1\n")
    docker.chmod(0o755)
    rc, out, err = run_bare(box_reader.program(engine_container.READER_MODULES, "on_box", params),
                            env={"PATH": str(tmp_path)})
    answer = box_reader.parse(out)
    assert rc == 0 and answer["changed"] is False and answer["result"]["status"] == "stopped", (answer, err)


class ModuleAction(Action):
    """An action whose module run is recorded instead of sent."""

    def __init__(self, check_mode=False, **kwargs):
        super(ModuleAction, self).__init__(**kwargs)
        self.modules = []

    def _execute_module(self, module_name=None, module_args=None, task_vars=None):
        self.modules.append((module_name, module_args))
        return {"changed": False, "from": "module"}


def test_read_or_run_masks_secret_options_and_leaves_check_runs_to_the_module():
    said = '{"changed": true, "msg": "started with key sk-never-shown", "messages": ["sk-never-shown"]}'
    action = ModuleAction(stdout=said)
    answer = box_reader.read_or_run(action, {}, "glm53.tensorfold.engine_container", ENGINE_SPEC, ENGINE_ARGS,
                                    engine_container.READER_MODULES, "on_box")
    assert answer["read_with"] == "box reader" and answer["changed"] is True and not action.modules
    assert "sk-never-shown" not in json.dumps(answer), answer
    # reader=False (a check run of a module that changes the host): the module, with the task's own args.
    action = ModuleAction(stdout=said)
    answer = box_reader.read_or_run(action, {}, "glm53.tensorfold.engine_container", ENGINE_SPEC, ENGINE_ARGS,
                                    engine_container.READER_MODULES, "on_box", reader=False)
    assert answer == {"changed": False, "from": "module", "read_with": "module"}
    assert not action.ran and action.modules == [("glm53.tensorfold.engine_container", ENGINE_ARGS)]


def test_the_smoke_test_runs_with_the_files_it_carries_and_nothing_else(tmp_path):
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    class Engine(BaseHTTPRequestHandler):
        def _answer(self, body):
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._answer({"status": "ok"} if self.path == "/health" else {"object": "list", "data": [{"id": "GLM-5.3-Flash"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._answer({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}}]})

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        params = ArgumentSpecValidator(SMOKE_SPEC).validate(
            {"url": "http://127.0.0.1:%d" % server.server_address[1], "host": "box7", "served_name": "GLM-5.3-Flash",
             "health_tries": 1, "health_delay": 0, "save_dir": str(tmp_path)}).validated_parameters
        rc, out, err = run_bare(box_reader.program(smoke.READER_MODULES, "on_box", params))
    finally:
        server.shutdown()
        server.server_close()
    answer = box_reader.parse(out)
    assert rc == 0 and answer["verdict"]["status"] == "live" and answer["changed"] is True, (answer, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.json", "smoke.json"]


def test_the_files_compiled_code_is_kept_in_the_cache_folder_and_read_back(tmp_path):
    import marshal
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    program = box_reader.program(converged.READER_MODULES, "read_box", PARAMS)
    rc, out, err = run_bare(program, env=env)
    assert rc == 0 and box_reader.parse(out)["code"] == "E_DOCKER", err
    folder = tmp_path / "cache" / box_reader.CACHE_FOLDER
    kept = sorted(path.name for path in folder.iterdir())
    assert len(kept) == len(converged.READER_MODULES) and all(name.endswith(".code") for name in kept), kept
    assert (folder.stat().st_mode & 0o777) == 0o700
    # The next run reads the kept code rather than compiling the source: a kept copy that says
    # something else is what runs.
    net = [path for path in folder.iterdir() if ".module_utils.net." in path.name][0]
    net.write_bytes(marshal.dumps(compile("raise SystemExit(7)", "net.py", "exec")))
    assert run_bare(program, env=env)[0] == 7
    # A damaged copy is compiled again and replaced; a copy of another version of the file goes.
    net.write_bytes(b"not code")
    stale = folder / net.name.replace(net.name.split(".")[-3], "0" * 20)
    stale.write_bytes(b"old")
    rc, out, err = run_bare(program, env=env)
    assert rc == 0 and box_reader.parse(out)["code"] == "E_DOCKER", err
    assert marshal.loads(net.read_bytes()).co_filename.endswith("net.py") and not stale.exists()


def test_a_cache_folder_that_cannot_be_written_only_costs_the_compile(tmp_path):
    (tmp_path / "cache").write_text("a file where the folder would go")
    rc, out, err = run_bare(box_reader.program(converged.READER_MODULES, "read_box", PARAMS),
                            env={"XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)})
    assert rc == 0 and box_reader.parse(out)["code"] == "E_DOCKER", err
