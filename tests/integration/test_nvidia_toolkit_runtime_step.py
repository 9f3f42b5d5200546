"""The nvidia_toolkit role's runtime step against a dockerd that refuses the edited daemon.json,
or that reads another daemon.json.

ansible-playbook runs the role's runtime.yml (and its "Restart docker" handler) for real on
localhost, on a daemon.json under tmp_path, with tests/standins/dockerd-start as the restart
command: it checks the file as dockerd does and refuses a directive also given as a flag (here the
unit's ``--default-runtime nvidia`` and the role's ``nvidia_toolkit_runtime_default: true``). This
machine's own dockerd is never touched.
"""
import json
import os
import sys

from ansible_run import ROOT, run_playbook

STANDIN = os.path.join(ROOT, "tests", "standins", "dockerd-start")
OPERATOR = '{\n  "log-driver": "json-file",\n  "data-root": "/srv/docker"\n}\n'
PLAYBOOK_OF = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: glm53.tensorfold.nvidia_toolkit
        tasks_from: %s
"""
PLAYBOOK = PLAYBOOK_OF % "runtime.yml"


def run(tmp_path, flags, text=OPERATOR, env=None, **more):
    daemon_json = tmp_path / "daemon.json"
    if text is not None:
        daemon_json.write_text(text)
        os.chmod(str(daemon_json), 0o640)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    variables = {"ansible_python_interpreter": sys.executable, "nvidia_toolkit_daemon_json": str(daemon_json), "nvidia_toolkit_runtime_default": True,
                 "nvidia_toolkit_docker_restart_command": [STANDIN, "--config-file", str(daemon_json)] + flags}
    variables.update(more)
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps(variables))
    rc, output = run_playbook(playbook, "localhost,", ROOT, ["-e", "@" + str(extra)],
                              env=dict(env or {}, DOCKERD_START_LOG=str(tmp_path / "starts.log")))
    return rc, " ".join(output.split()), daemon_json


def test_a_dockerd_refusing_the_edit_gets_its_previous_file_back_and_the_run_says_why(tmp_path):
    rc, output, daemon_json = run(tmp_path, ["--default-runtime", "nvidia"])
    assert rc != 0
    assert ("[E_DOCKER] localhost: Docker did not start again after this run changed %s: unable to configure the "
            "Docker daemon with file %s: the following directives are specified both as a flag and in the configuration "
            "file: default-runtime: (from flag: nvidia, from file: nvidia); %s is back as it was and Docker runs again "
            "with it." % (daemon_json, daemon_json, daemon_json)) in output
    assert daemon_json.read_text() == OPERATOR and (os.stat(str(daemon_json)).st_mode & 0o777) == 0o640
    assert (tmp_path / "starts.log").read_text() == "start\n"  # started again with the old file


def test_a_created_file_that_dockerd_refuses_is_removed_again(tmp_path):
    rc, output, daemon_json = run(tmp_path, ["--default-runtime", "nvidia"], text=None)
    assert rc != 0 and "is back as it was and Docker runs again with it" in output
    assert not daemon_json.exists()


def test_a_dockerd_that_takes_the_edit_is_restarted_once_and_keeps_it(tmp_path):
    rc, output, daemon_json = run(tmp_path, [])
    assert rc == 0, output
    assert json.loads(daemon_json.read_text())["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert (tmp_path / "starts.log").read_text() == "start\n"


def test_a_dockerd_started_with_another_config_file_is_named_and_nothing_is_edited(tmp_path):
    # docker.yml's look at the running dockerd: a drop-in's --config-file /srv/docker/daemon.json.
    look = {"docker": {"ok": True, "dockerd": {"exe": "/usr/bin/dockerd", "config_file": "/srv/docker/daemon.json"}}}
    rc, output, daemon_json = run(tmp_path, [], nvidia_toolkit_docker_look=look)
    assert rc != 0
    assert ("[E_DOCKER] localhost: the running dockerd reads /srv/docker/daemon.json (its --config-file), not %s, so the "
            "nvidia runtime would never reach it; nothing was changed. Set nvidia_toolkit_daemon_json to "
            "/srv/docker/daemon.json and run again." % daemon_json) in output
    assert daemon_json.read_text() == OPERATOR and not (tmp_path / "starts.log").exists()
    # The dockerd that reads this very file: edited and restarted as ever.
    look["docker"]["dockerd"]["config_file"] = str(daemon_json)
    rc, output, daemon_json = run(tmp_path, [], nvidia_toolkit_docker_look=look)
    assert rc == 0 and '"nvidia"' in daemon_json.read_text()


DOCKER_CLI = os.path.join(ROOT, "tests", "standins", "docker-cli")
REGISTERED = ('{\n    "runtimes": {\n        "nvidia": {\n            "args": [],\n'
              '            "path": "/usr/bin/nvidia-container-runtime"\n        }\n    }\n}\n')


def test_a_dockerd_started_before_the_hook_was_installed_is_restarted_once(tmp_path):
    # daemon.json had the runtime already (nothing to edit) and docker info lists it (the docker stand-in), but
    # this run's install brought the hook after dockerd's start: dockerd has no --gpus driver until it restarts.
    look = {"docker": {"ok": True, "dockerd": {"exe": "/usr/bin/dockerd", "config_file": str(tmp_path / "daemon.json")}}}
    env = {"PATH": DOCKER_CLI + os.pathsep + os.environ["PATH"]}
    look["tools"] = {"dockerd": "/usr/bin/dockerd", "nvidia-container-runtime-hook": None}
    rc, output, daemon_json = run(tmp_path, [], text=REGISTERED, env=env, nvidia_toolkit_docker_look=look,
                                  nvidia_toolkit_runtime_default=False)
    assert rc == 0, output
    assert "the running dockerd started before this run installed /usr/bin/nvidia-container-runtime-hook" in output
    assert daemon_json.read_text() == REGISTERED and (tmp_path / "starts.log").read_text() == "start\n"
    # The hook was there before the install (an upgrade, a second run): no restart.
    (tmp_path / "starts.log").unlink()
    look["tools"]["nvidia-container-runtime-hook"] = "/usr/bin/nvidia-container-runtime-hook"
    rc, output, daemon_json = run(tmp_path, [], text=REGISTERED, env=env, nvidia_toolkit_docker_look=look,
                                  nvidia_toolkit_runtime_default=False)
    assert rc == 0 and not (tmp_path / "starts.log").exists()


VERIFY = PLAYBOOK_OF % "verify.yml"


def verify(tmp_path, run_answer):
    """The role's closing checks with the docker stand-in: its daemon lists nvidia, `docker run` answers as told."""
    playbook = tmp_path / "verify.yml"
    playbook.write_text(VERIFY)
    extra = tmp_path / "verify-vars.json"
    extra.write_text(json.dumps({"ansible_python_interpreter": sys.executable}))
    rc, output = run_playbook(playbook, "localhost,", ROOT, ["-e", "@" + str(extra)],
                              env={"PATH": DOCKER_CLI + os.pathsep + os.environ["PATH"], "STANDIN_DOCKER_RUN": run_answer})
    return rc, " ".join(output.split())


def test_a_test_image_docker_cannot_pull_is_e_docker_not_a_missing_runtime(tmp_path):
    rc, output = verify(tmp_path, "pull-fails")
    assert rc != 0 and "[E_NVIDIA_RUNTIME]" not in output
    assert ("[E_DOCKER] localhost: the --gpus all test could not run: ubuntu:24.04 is not on the host and dockerd could not "
            "pull it: Unable to find image 'ubuntu:24.04' locally | docker: Error response from daemon: Get "
            "\"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io on 127.0.0.53:53: server "
            "misbehaving. Give dockerd access to the registry") in output
    # dockerd refusing --gpus is the runtime's, as before; a container that lists the GPUs passes.
    rc, output = verify(tmp_path, "no-gpu-driver")
    assert rc != 0 and "[E_NVIDIA_RUNTIME] localhost: a --gpus all container of ubuntu:24.04 could not list the GPUs" in output
    rc, output = verify(tmp_path, "gpus")
    assert rc == 0, output
