# -*- coding: utf-8 -*-
"""Which host gets the Hub client (weights_fetch/tasks/client.yml), with real ansible-playbook on
this controller: the seed that has something to fetch gets it; a box deployed again whose every
repository pre-flight's read found whole (converged_info's verified_weights: another setting, an
image removed) does not, even as the seed, so it never needs the Hub.

The controller's client bundle is a small stand-in tarball in the cache the role reads, so no pip
runs here; the role's own tasks unpack it.
"""

import io
import json
import platform
import re
import sys
import tarfile

from ansible_run import run_playbook

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Plan the weights
      ansible.builtin.include_role: {name: glm53.tensorfold.weights_fetch, tasks_from: plan}
    - name: Choose the seed
      ansible.builtin.include_role: {name: glm53.tensorfold.weights_fetch, tasks_from: seed}
    - name: Provide the client
      ansible.builtin.include_role: {name: glm53.tensorfold.weights_fetch, tasks_from: client}
    - name: Say what the run chose
      ansible.builtin.debug:
        msg: "CHOSEN {{ {'needed': weights_fetch_client_needed, 'repos': weights_fetch_repos} | to_json }}"
"""
HUB_VERSION = "1.1.0"  # any: the stand-in bundle is cached under the name the role derives from it


def stand_in_client(path):
    body = b"# stand-in\n"
    member = tarfile.TarInfo("huggingface_hub/__init__.py")
    member.size = len(body)
    with tarfile.open(str(path), mode="w:gz") as tar:
        tar.addfile(member, io.BytesIO(body))


# The air-gapped bundle's include (bundle/tasks/deploy.yml): the client alone, no plan, the seed named.
BUNDLE_PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Provide the client as the bundle does
      ansible.builtin.include_role: {name: glm53.tensorfold.weights_fetch, tasks_from: client}
      vars: {weights_fetch_seed: box}
    - name: Say what the run chose
      ansible.builtin.debug:
        msg: "CHOSEN {{ {'needed': weights_fetch_client_needed, 'repos': []} | to_json }}"
"""


def run(tmp_path, name, verified=None, playbook_text=PLAYBOOK):
    """One run on one local box (its own seed, peer strategy, model and drafter); returns what it
    chose and the box's data folder."""
    data = tmp_path / name
    (data / ".state" / "weights").mkdir(parents=True)
    cache = tmp_path / ("cache-" + name)
    cache.mkdir()
    stand_in_client(cache / ("huggingface_hub-%s-cp%d%d-%s.tar.gz" % ((HUB_VERSION,) + sys.version_info[:2] + (platform.machine(),))))
    host_vars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "tensorfold_data_dir": str(data), "tensorfold_drafter": "dflash2",
                 "weights_fetch_strategy": "peer", "weights_fetch_client_cache": str(cache),
                 "weights_fetch_hf_hub_version": HUB_VERSION}
    inventory = tmp_path / ("hosts-%s.json" % name)
    inventory.write_text(json.dumps({"all": {"hosts": {"box": host_vars}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(playbook_text)
    extra = []
    if verified is not None:
        read = tmp_path / ("read-%s.json" % name)
        read.write_text(json.dumps({"step_converged_info": {"boxes": {"box": {"verified_weights": verified}}}}))
        extra = ["-e", "@%s" % read]
    rc, out = run_playbook(playbook, inventory, tmp_path, extra_args=extra, env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    assert rc == 0, out[-3000:]
    said = re.search(r'"msg": ("CHOSEN .*")$', out, re.M)
    assert said, out[-3000:]
    chosen = json.loads(json.loads(said.group(1))[len("CHOSEN "):])
    return chosen, data


def client_unpacked(data):
    return list(data.glob(".state/hf-client/*/huggingface_hub/__init__.py"))


def test_the_seed_with_weights_to_fetch_gets_the_client(tmp_path):
    chosen, data = run(tmp_path, "new")
    assert chosen["needed"] is True and [repo["name"] for repo in chosen["repos"]] == ["model", "drafter"]
    assert client_unpacked(data)


def moved(repos, old, new):
    """The repositories as a box with the data folder NEW plans them."""
    return [dict(repo, local_dir=repo["local_dir"].replace("/%s/" % old, "/%s/" % new),
                 state_dir=repo["state_dir"].replace("/%s/" % old, "/%s/" % new)) for repo in repos]


def test_a_seed_whose_every_repository_was_read_whole_gets_no_client(tmp_path):
    # The read holds the deploy record's repositories as they were planned, folders and all.
    repos = run(tmp_path, "first")[0]["repos"]
    chosen, data = run(tmp_path, "again", verified=moved(repos, "first", "again"))
    assert chosen["needed"] is False and not client_unpacked(data)
    # One repository not whole (the drafter's files changed since their verification): the client comes.
    chosen, data = run(tmp_path, "partly", verified=moved(repos[:1], "first", "partly"))
    assert chosen["needed"] is True and client_unpacked(data)
    # Whole, but at another revision than this run's.
    other = [dict(repo, revision="0" * 40) for repo in moved(repos, "first", "other")]
    chosen, data = run(tmp_path, "other", verified=other)
    assert chosen["needed"] is True and client_unpacked(data)


def test_the_bundles_seed_gets_the_client_to_verify_the_bundles_copy(tmp_path):
    # No plan before it (the bundle's play), so no repositories to compare with a read.
    chosen, data = run(tmp_path, "bundle", verified=[], playbook_text=BUNDLE_PLAYBOOK)
    assert chosen["needed"] is True and client_unpacked(data)
