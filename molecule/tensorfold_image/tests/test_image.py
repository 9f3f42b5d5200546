"""The image converge left on the three boxes (Molecule's testinfra verifier runs this file; the
operator's runs of the same playbook, check mode and a conflicting patch, are in ../verify.yml)."""

import json
import os
import re

import testinfra

testinfra_hosts = ["gpu_hosts"]

EPHEMERAL = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
BUILD_HOST = "tensorfold_image-gpu-a"  # the role builds on the first host and moves the image


def published_ref():
    with open(os.path.join(EPHEMERAL, "ref-converge.txt")) as f:  # written by converge.yml
        return f.read().strip()


def pins():  # the stand-in sources' commits (tests/standins/tensorfold_source/make_standins.sh)
    with open(os.path.join(EPHEMERAL, "standins", "pins.env")) as f:
        return dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)


def image(host):
    return json.loads(host.check_output("docker image inspect %s", published_ref()))[0]


def test_every_box_has_the_one_image_the_build_host_built(host):
    build_host = testinfra.get_host("ansible://" + BUILD_HOST, ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
    assert image(host)["Id"] == image(build_host)["Id"]


def test_the_move_left_no_archive_secret_or_server_behind(host):
    state = "/srv/glm53/.state/image"
    assert host.run("ls -A %s/archive", state).stdout.strip() == ""
    assert not host.file(state + "/move.secret").exists
    # The build host's server stopped when the copies ended (its port, tensorfold_image_move_port).
    probe = host.run("python3 -c 'import socket; socket.create_connection((\"%s\", 18471), 2)'", BUILD_HOST)
    assert probe.rc != 0 and "refused" in probe.stderr.lower(), probe.stderr
    # The controller never held the archive.
    assert not os.path.exists(os.path.join(EPHEMERAL, "controller-cache", "images"))


def test_only_the_build_host_has_a_build_cache(host):
    total = host.check_output("docker buildx du | tail -1")
    assert (re.search(r"Total:\s+0B", total) is None) == (host.backend.get_hostname() == BUILD_HOST), total


def test_the_labels_carry_the_engine_commit_the_series_hash_and_the_collection_version(host):
    labels = image(host)["Config"]["Labels"]
    assert labels["io.glm53.tensorfold.engine-commit"] == pins()["ENGINE_COMMIT"]
    assert re.fullmatch("[0-9a-f]{64}", labels["io.glm53.tensorfold.patch-series-sha256"])
    assert re.match(r"[0-9]+\.[0-9]+\.[0-9]+", labels["io.glm53.tensorfold.collection-version"])


def test_the_patches_were_applied_in_order_the_site_patch_last(host):
    ref = published_ref()
    applied = host.check_output("docker run --rm %s cat /opt/tensorfold/patches.txt", ref)
    assert applied.split() == ["0001-first-change.patch", "0002-second-change.patch",
                               "0003-third-change.patch", "0100-site-change.patch"]
    series = host.check_output("docker run --rm %s cat /opt/tensorfold/native/share/series.txt", ref)
    assert series.splitlines() == ["stand-in TensorFold source", "0001 first-change", "0002 second-change",
                                   "0003 third-change", "0100 site-change"]


def test_the_engine_runs_and_finds_its_sm_120_kernels(host):
    out = host.check_output("docker run --rm %s sh -c %s", published_ref(),
                            'tensorfold-native --version && echo "$TENSORFOLD_CUDA_KERNELS" && '
                            'cat "$TENSORFOLD_CUDA_KERNELS/aot.json"')
    assert "tensorfold-native" in out
    assert "/opt/tensorfold/kernels/sm_120" in out
    assert '"sm": 120' in out
