"""tensorfold_image_build_host and --limit, the real role's tasks on local hosts.

The build host is checked against the inventory in pre-flight (settings_check), so a run limited
to other boxes passes it; it must be in the run only where it would build or lend the image
(presence.yml). A stand-in for community.docker's docker_image_info answers as the collection
documents (``images``: the images found, each with its ``Id``) from the variable the play passes
it in the environment, so each host has the image or not as the test says.
"""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT, run_playbook  # noqa: E402

IMAGE_INFO = '''#!/usr/bin/python
import json, os
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec=dict(name=dict(type="list", elements="str")), supports_check_mode=True)
present = os.environ.get("STANDIN_IMAGE_PRESENT") == "True"
if os.environ.get("STANDIN_IMAGE_PRESENT") == "down":  # no Docker daemon, as the collection reports it
    module.fail_json(msg="Error connecting: Error while fetching server API version: ('Connection aborted.', "
                         "FileNotFoundError(2, 'No such file or directory'))")
module.exit_json(changed=False, images=[{"Id": "sha256:" + "a" * 64, "RepoTags": module.params["name"]}] if present else [])
'''
PLAYBOOK = """
- name: The image settings (pre-flight's check)
  hosts: gpu_hosts
  gather_facts: false
  tasks:
    - name: Check them
      ansible.builtin.import_role: {name: glm53.tensorfold.tensorfold_image, tasks_from: validate}

- name: Find the image and choose the build host
  hosts: gpu_hosts
  gather_facts: false
  tags: [presence]
  tasks:
    - name: What inputs.yml publishes
      ansible.builtin.set_fact:
        tensorfold_image_ref: glm53/tensorfold-native:test
        tensorfold_image_strategy: "{{ standin_strategy }}"
    - name: Look
      ansible.builtin.import_role: {name: glm53.tensorfold.tensorfold_image, tasks_from: presence}
      environment: {STANDIN_IMAGE_PRESENT: "{{ standin_has_image }}"}
"""


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    base = tmp_path_factory.mktemp("standin")
    docker = base / "ansible_collections" / "community" / "docker"
    (docker / "plugins" / "modules").mkdir(parents=True)
    (docker / "meta").mkdir()
    (docker / "meta" / "runtime.yml").write_text("requires_ansible: '>=2.15'\n")
    (docker / "plugins" / "modules" / "docker_image_info.py").write_text(IMAGE_INFO)
    return str(base)


def run(standin, tmp_path, limit=None, build_host="gpu-a", has_image=None, strategy="once", tags="all", extra=()):
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "tensorfold_image_build_host": build_host, "standin_strategy": strategy,
                                  # The pins an operator sets (their form is all validate.yml reads).
                                  "tensorfold_image_engine_commit": "f350cd3e" + "0" * 32,
                                  "tensorfold_image_patch_series_dir": str(tmp_path)},
                         "children": {"gpu_hosts": {"hosts": dict(
                             (host, {"standin_has_image": (has_image or {}).get(host, False)}) for host in ("gpu-a", "gpu-b"))}}}}
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    args = ["--tags", tags] + (["--limit", limit] if limit else []) + list(extra)
    return run_playbook(tmp_path / "play.yml", tmp_path / "hosts.yml", cwd=tmp_path, extra_args=args,
                        env={"ANSIBLE_COLLECTIONS_PATH": standin + os.pathsep + os.path.join(ROOT, ".cache", "collections")})


def test_a_build_host_outside_the_limit_passes_the_settings_check(standin, tmp_path):
    rc, output = run(standin, tmp_path, limit="gpu-b", has_image={"gpu-b": True})
    assert rc == 0, output


def test_a_build_host_that_is_no_box_of_the_inventory_is_refused_in_pre_flight(standin, tmp_path):
    rc, output = run(standin, tmp_path, build_host="gpu-z", has_image={"gpu-a": True, "gpu-b": True})
    assert rc != 0
    assert "[E_SETTINGS] gpu-a: tensorfold_image_build_host is 'gpu-z', which is not a host of the inventory's gpu_hosts" in output


def test_a_build_host_outside_the_run_is_refused_only_where_it_must_build_or_lend(standin, tmp_path):
    rc, output = run(standin, tmp_path, limit="gpu-b")
    assert rc != 0
    assert ("[E_SETTINGS] gpu-b: tensorfold_image_build_host is gpu-a, which is not in this run, and gpu-b lacks the image "
            "glm53/tensorfold-native:test, which it would build or lend. Add gpu-a to --limit") in " ".join(output.split()), output
    # Each host builds its own: the build host plays no part.
    work = tmp_path / "each"
    work.mkdir()
    rc, output = run(standin, work, limit="gpu-b", strategy="each")
    assert rc == 0, output
    # In the run, it builds for the others.
    work = tmp_path / "all"
    work.mkdir()
    rc, output = run(standin, work)
    assert rc == 0, output


def test_a_docker_that_does_not_answer_is_e_docker_and_in_check_mode_an_image_to_build(standin, tmp_path):
    rc, output = run(standin, tmp_path, has_image={"gpu-a": True, "gpu-b": "down"})
    assert rc != 0
    assert "[E_DOCKER] gpu-b: Docker did not answer the image lookup: Error connecting" in " ".join(output.split()), output
    # --check on a box whose Docker the toolkit step would install: the image counts as missing.
    work = tmp_path / "check"
    work.mkdir()
    rc, output = run(standin, work, has_image={"gpu-a": True, "gpu-b": "down"}, extra=["--check"])
    assert rc == 0 and "E_DOCKER" not in output, output


def test_patch_folders_that_do_not_exist_are_refused_by_the_settings_check(standin, tmp_path):
    missing = tmp_path / "no-such-folder"
    rc, output = run(standin, tmp_path, has_image={"gpu-a": True, "gpu-b": True},
                     extra=("-e", "tensorfold_image_site_patches_dir=%s" % missing,
                            "-e", "tensorfold_image_patch_series_dir=%s" % (tmp_path / "no-series")))
    text = " ".join(output.split())
    assert rc != 0
    assert "[E_SETTINGS] gpu-a: tensorfold_image_patch_series_dir %s is not a folder on the controller." % (tmp_path / "no-series") in text
    assert "[E_SETTINGS] gpu-b: tensorfold_image_site_patches_dir %s is not a folder on the controller" % missing in text
    # An empty string means no site patches.
    rc, output = run(standin, tmp_path, has_image={"gpu-a": True, "gpu-b": True}, extra=("-e", "tensorfold_image_site_patches_dir="))
    assert rc == 0, output
