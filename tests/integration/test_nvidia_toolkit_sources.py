"""The nvidia_toolkit role's apt files rendered for Debian and Ubuntu hosts.

Renders roles/nvidia_toolkit/templates with Ansible's own templar and the role's vars/main.yml,
with the facts a Debian 12, Debian 13, Ubuntu 22.04 and Ubuntu 24.04 host report, and checks the
deb822 stanzas apt reads (sources.list(5)): a flat repository (Suites "/", no Components) per
architecture, Signed-By pointing at the keyring, and Docker's suite/component layout.
"""
import os

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "roles", "nvidia_toolkit")

HOSTS = {
    "debian12": {"distribution": "Debian", "distribution_release": "bookworm", "distribution_version": "12.12", "architecture": "x86_64"},
    "debian13": {"distribution": "Debian", "distribution_release": "trixie", "distribution_version": "13.2", "architecture": "x86_64"},
    "ubuntu2204": {"distribution": "Ubuntu", "distribution_release": "jammy", "distribution_version": "22.04", "architecture": "x86_64"},
    "ubuntu2404": {"distribution": "Ubuntu", "distribution_release": "noble", "distribution_version": "24.04", "architecture": "aarch64"},
}


LOADER = DataLoader()


def trusted(value):
    """Mark the strings of a role's own vars file as templates, as Ansible does for role files."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def load(name):
    return trusted(LOADER.load_from_file(os.path.join(ROLE, name)))


def render(template, facts, **overrides):
    # The role's dependency, the settings role, holds the shared toolkit pins (repository, key).
    variables = dict(trusted(LOADER.load_from_file(os.path.join(ROLE, "..", "tensorfold", "defaults", "main.yml"))))
    variables.update(load("defaults/main.yml"))
    variables.update(load("vars/main.yml"))
    variables.update(overrides)
    variables["ansible_facts"] = dict(facts, os_family="Debian")
    variables["ansible_managed"] = "Ansible managed"
    with open(os.path.join(ROLE, "templates", template)) as handle:
        source = handle.read()
    return Templar(loader=LOADER, variables=variables).template(trust_as_template(source))


def stanza(text):
    """The deb822 fields of a one-stanza file (comments dropped)."""
    fields = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, dummy, value = line.partition(":")
        assert not line[0].isspace(), "no continuation lines expected: %r" % line
        fields[key] = value.strip()
    return fields


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_toolkit_source_is_a_signed_flat_repository(host):
    facts = HOSTS[host]
    fields = stanza(render("nvidia-container-toolkit.sources.j2", facts))
    arch = {"x86_64": "amd64", "aarch64": "arm64"}[facts["architecture"]]
    assert fields == {
        "Types": "deb",
        "URIs": "https://nvidia.github.io/libnvidia-container/stable/deb/" + arch,
        "Suites": "/",
        "Signed-By": "/etc/apt/keyrings/nvidia-container-toolkit.asc",
    }


def test_toolkit_source_follows_a_mirror_and_another_keyring():
    fields = stanza(render("nvidia-container-toolkit.sources.j2", HOSTS["ubuntu2204"],
                           nvidia_toolkit_apt_repo_url="http://mirror.internal/nvidia/stable/deb",
                           nvidia_toolkit_apt_keyring="/usr/share/keyrings/nvidia-container-toolkit.asc"))
    assert fields["URIs"] == "http://mirror.internal/nvidia/stable/deb/amd64"
    assert fields["Signed-By"] == "/usr/share/keyrings/nvidia-container-toolkit.asc"


def test_pin_names_all_four_packages_at_one_version():
    text = render("nvidia-container-toolkit.pref.j2", HOSTS["debian12"], nvidia_toolkit_version="1.18.1-1")
    assert stanza(text) == {
        "Package": "nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1",
        "Pin": "version 1.18.1-1",
        "Pin-Priority": "1001",
    }


@pytest.mark.parametrize("host,distro,suite", [
    ("debian12", "debian", "bookworm"), ("debian13", "debian", "trixie"),
    ("ubuntu2204", "ubuntu", "jammy"), ("ubuntu2404", "ubuntu", "noble"),
])
def test_docker_source_uses_the_release_suite(host, distro, suite):
    fields = stanza(render("docker.sources.j2", HOSTS[host]))
    assert fields["URIs"] == "https://download.docker.com/linux/" + distro
    assert fields["Suites"] == suite
    assert fields["Components"] == "stable"
    assert fields["Signed-By"] == "/etc/apt/keyrings/docker.asc"
