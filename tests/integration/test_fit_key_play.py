"""rank_container's context-fit key is the same for a full run and for a restart on its own
(``site.yml --tags restart``: no weights_fetch, no tensorfold_image facts), for
MODEL_SOURCE=local and download. Templates the role's fit fields with ansible-playbook on localhost
and builds the key the way the engine_container module does: from the host checks' cards in a full
run, from the cards the module reads itself in a restart on its own."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
sys.path.insert(0, COLLECTIONS)

from ansible_collections.glm53.tensorfold.plugins.module_utils.engine_container import EngineContainer  # noqa: E402

GPUS = [{"index": 0, "uuid": "GPU-aaaa", "name": "NVIDIA RTX PRO 6000", "memory_total_mib": 97887},
        {"index": 1, "uuid": "GPU-bbbb", "name": "NVIDIA RTX PRO 6000", "memory_total_mib": 97887}]


def fit_fields(tmp_path, name, variables):
    out = tmp_path / (name + ".json")
    playbook = tmp_path / (name + ".yml")
    # The role's variables as the engine_container task reads them: the settings' defaults, the
    # role's defaults and its derived vars.
    files = [os.path.join(ROOT, "roles", role, kind, "main.yml")
             for role, kind in (("tensorfold", "defaults"), ("rank_container", "defaults"), ("rank_container", "vars"))]
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "vars_files": files, "tasks": [
        {"ansible.builtin.copy": {"content": "{{ rank_container_fit_fields | to_json }}", "dest": str(out),
                                  "mode": "0644"}}]}]))
    extra = tmp_path / (name + "-vars.json")
    extra.write_text(json.dumps(dict(variables, tensorfold_data_dir=str(tmp_path))))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
    subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "@" + str(extra),
                    "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
                   check=True, capture_output=True, env=env, cwd=ROOT)
    return json.loads(out.read_text())


def key(fields, image, checked):
    """The module's key: a full run hands it the host checks' cards, a restart reads every card."""
    params = {"host": "box1", "data_dir": "/srv/glm53", "fit_fields": fields, "gpu_indices": [0, 1],
              "gpus": GPUS if checked else None}
    return EngineContainer(params, docker=None, read_gpus=lambda: list(reversed(GPUS))).fit_key(image)


@pytest.mark.parametrize("source", ["local", "download"])
def test_restart_on_its_own_computes_the_full_runs_key(tmp_path, source):
    base = {"tensorfold_model_source": source, "tensorfold_model_dir": str(tmp_path / "mine")}
    full = fit_fields(tmp_path, "full", dict(base, tensorfold_image_ref="glm53-tensorfold:0123abcd",
                                             tensorfold_image_tag="0123abcd",
                                             weights_fetch_model_revision="local" if source == "local"
                                             else "078455ffe6472f9a52fbc1139f58b9db2881b25c",
                                             weights_fetch_model_path=str(tmp_path / "model")))
    restart = fit_fields(tmp_path, "restart", dict(base, rank_container_action="restart"))
    # The restart runs the image the container runs: the module fills the tag in from it.
    assert key(full, "glm53-tensorfold:0123abcd", True) == key(restart, "glm53-tensorfold:0123abcd", False)
    assert full["checkpoint_revision"] == restart["checkpoint_revision"]
    assert (full["checkpoint_revision"] == "local") == (source == "local")
