"""What the check-mode pass, converge and the idempotence run left on each box (Molecule's
testinfra verifier runs this file; a run with a version the repository lacks is in ../verify.yml).
The stand-in repository on the box's loopback offers 1.18.1-1 and 1.18.2-1; 1.18.1-1 is pinned."""

import json

import pytest

testinfra_hosts = ["gpu_hosts"]

WANTED = "1.18.1-1"
PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1"]
# The operator's daemon.json (prepare.yml) with the runtime added: exactly these bytes.
EXPECTED_DAEMON_JSON = """{
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "3"},
  "debug": false,
  "runtimes": {
    "nvidia": {
      "args": [],
      "path": "/usr/bin/nvidia-container-runtime"
    }
  }
}
"""


@pytest.mark.parametrize("path", ["/etc/apt/keyrings/nvidia-container-toolkit.asc",
                                  "/etc/apt/sources.list.d/nvidia-container-toolkit.sources",
                                  "/etc/apt/preferences.d/nvidia-container-toolkit"])
def test_the_repository_files_are_roots_and_world_readable(host, path):
    f = host.file(path)
    assert (f.is_file, f.user, f.group, f.mode) == (True, "root", "root", 0o644)


def test_the_keyring_is_the_repositorys_key(host):
    assert (host.file("/etc/apt/keyrings/nvidia-container-toolkit.asc").content_string
            == host.file("/srv/glm53-nvidia-repo/gpgkey").content_string)


def test_the_source_is_deb822_and_signed_by_that_keyring(host):
    assert ("Types: deb\n"
            "URIs: http://127.0.0.1:8080/stable/deb/amd64\n"
            "Suites: /\n"
            "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc\n"
            ) in host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.sources").content_string


def test_the_pin_holds_all_four_packages_at_the_wanted_version(host):
    assert ("Package: " + " ".join(PACKAGES) + "\n"
            "Pin: version " + WANTED + "\n"
            "Pin-Priority: 1001\n") in host.file("/etc/apt/preferences.d/nvidia-container-toolkit").content_string


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_is_installed_at_the_pinned_version_not_the_newer_one_and_held(host, package):
    out = host.check_output("dpkg-query -W -f '${Version} ${Status}' %s", package)
    assert out == WANTED + " hold ok installed"


@pytest.mark.parametrize("path", ["/etc/apt/sources.list.d/nvidia-docker.list",
                                  "/usr/share/keyrings/nvidia-docker-keyring.gpg"])
def test_the_legacy_nvidia_docker_files_are_gone(host, path):
    assert not host.file(path).exists


def test_daemon_json_kept_the_operators_bytes_and_gained_the_runtime(host):
    assert host.file("/etc/docker/daemon.json").content_string == EXPECTED_DAEMON_JSON


def test_nvidia_ctk_means_the_same_rewrite_in_its_own_formatting(host):
    ctk = host.check_output(
        "cp /root/daemon.json.before /tmp/ctk.json && nvidia-ctk runtime configure --runtime=docker"
        " --config=/tmp/ctk.json --nvidia-runtime-path=/usr/bin/nvidia-container-runtime >/dev/null"
        " && cat /tmp/ctk.json")
    assert json.loads(ctk) == json.loads(EXPECTED_DAEMON_JSON)
    assert ctk.strip() != EXPECTED_DAEMON_JSON.strip()  # nvidia-ctk reformats; the role does not


def test_docker_runs_with_the_one_nvidia_runtime(host):
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert [name for name in runtimes if name == "nvidia"] == ["nvidia"]
    assert runtimes["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"


def test_dockerd_restarted_once_over_check_converge_and_idempotence(host):
    log = host.file("/var/log/glm53-dockerd-restarts.log").content_string
    assert len([line for line in log.splitlines() if line.startswith("restart ")]) == 1, log


def test_the_operator_user_is_in_the_docker_group(host):
    assert "docker" in host.user("tfuser").groups


def test_the_hosts_python_imports_requests_for_the_docker_modules(host):
    # gpu-a started without python3-requests (prepare.yml): the role installed Debian's package.
    assert host.package("python3-requests").is_installed
    assert host.run("python3 -c 'import requests'").rc == 0
