#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: glm53.tensorfold contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: bundle_apt_mirror
short_description: Carry the pinned NVIDIA Container Toolkit packages of a flat apt repository into the bundle
description:
  - Copies a flat apt repository's signed index (C(InRelease), and C(Release), C(Release.gpg),
    C(Packages), C(Packages.gz) where the repository has them) and its signing key verbatim, and
    only the packages of I(packages) at I(version), each checked against the sha256 the index gives.
  - The result, C(DEST/gpgkey) and C(DEST/deb/ARCH/...), is the same flat repository at the same
    relative paths, so apt on a host reads it through a C(file://) URL and checks NVIDIA's
    signature and every checksum as it would online. Only the pinned packages' files are there.
  - Packages already present with the right sha256 are not fetched again.
version_added: "0.1.0"
author:
  - glm53.tensorfold contributors (@glm53)
options:
  repo_url:
    description: The flat repository without the architecture (nvidia_toolkit_apt_repo_url).
    type: str
    required: true
  gpg_key_url:
    description: The repository's signing key (nvidia_toolkit_gpg_key_url).
    type: str
    required: true
  arches:
    description: The architectures to carry (C(amd64), C(arm64)).
    type: list
    elements: str
    default: [amd64]
  packages:
    description: The package names to carry (nvidia_toolkit_packages).
    type: list
    elements: str
    required: true
  version:
    description: Their pinned version (nvidia_toolkit_version).
    type: str
    required: true
  dest:
    description: The folder to lay the repository out in (the bundle's C(toolkit) item).
    type: path
    required: true
  timeout:
    description: Seconds per request.
    type: int
    default: 60
attributes:
  check_mode:
    support: none
    description: Fetches; used only by playbooks/bundle.yml, which is not run in check mode.
"""

EXAMPLES = r"""
- name: Carry the toolkit packages
  glm53.tensorfold.bundle_apt_mirror:
    repo_url: https://nvidia.github.io/libnvidia-container/stable/deb
    gpg_key_url: https://nvidia.github.io/libnvidia-container/gpgkey
    packages: [nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container-tools, libnvidia-container1]
    version: 1.18.2-1
    dest: /srv/glm53-bundle/toolkit
"""

RETURN = r"""
fetched:
  description: Files written by this run (paths under I(dest)).
  returned: always
  type: list
  elements: str
packages:
  description: Per architecture, the packages carried (name, filename, size, sha256).
  returned: success
  type: dict
files:
  description: Every file the repository carried in holds now (paths under I(dest)); anything else there is left from an earlier build.
  returned: success
  type: list
  elements: str
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.glm53.tensorfold.plugins.module_utils import bundle
from ansible_collections.glm53.tensorfold.plugins.module_utils.codes import problem

INDEX_REQUIRED = ("InRelease", "Packages")
INDEX_OPTIONAL = ("Release", "Release.gpg", "Packages.gz")


def fetch(url, timeout, optional=False):
    try:
        return open_url(url, timeout=timeout, follow_redirects="safe").read()
    except Exception as err:  # pylint: disable=broad-except  # urllib and ansible raise several kinds
        if optional and ("404" in str(err) or "No such file" in str(err)):  # http, file://
            return None
        raise bundle.BundleError("toolkit: %s could not be fetched (%s)" % (url, err), ["toolkit"])


def put(path, data):
    """Write data unless the file holds it already; True when written."""
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    except OSError:
        pass
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    with open(path + ".tmp", "wb") as handle:
        handle.write(data)
    os.rename(path + ".tmp", path)
    return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_url=dict(type="str", required=True),
            gpg_key_url=dict(type="str", required=True, no_log=False),
            arches=dict(type="list", elements="str", default=["amd64"]),
            packages=dict(type="list", elements="str", required=True),
            version=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            timeout=dict(type="int", default=60),
        ),
    )
    p = module.params
    fetched, carried, files = [], {}, ["gpgkey"]
    try:
        if put(os.path.join(p["dest"], "gpgkey"), fetch(p["gpg_key_url"], p["timeout"])):
            fetched.append("gpgkey")
        for arch in p["arches"]:
            base = p["repo_url"].rstrip("/") + "/" + arch
            folder = os.path.join(p["dest"], "deb", arch)
            index = {}
            for name in INDEX_REQUIRED + INDEX_OPTIONAL:
                data = fetch(base + "/" + name, p["timeout"], optional=name in INDEX_OPTIONAL)
                if data is not None:
                    index[name] = data
                    files.append("deb/%s/%s" % (arch, name))
                    if put(os.path.join(folder, name), data):
                        fetched.append("deb/%s/%s" % (arch, name))
            chosen = bundle.select_packages(bundle.parse_packages(index["Packages"].decode("utf-8")),
                                            p["packages"], p["version"], arch)
            for pkg in chosen:
                rel = os.path.normpath(pkg["filename"])
                target = os.path.join(folder, rel)
                files.append("deb/%s/%s" % (arch, rel.replace(os.sep, "/")))
                if os.path.isfile(target) and bundle.file_sha256(target) == pkg["sha256"]:
                    continue
                data = fetch(base + "/" + rel.replace(os.sep, "/"), p["timeout"])
                if hashlib.sha256(data).hexdigest() != pkg["sha256"]:
                    raise bundle.BundleError("toolkit: %s arrived with a sha256 other than the repository's index gives" % pkg["filename"], ["toolkit"])
                put(target, data)
                fetched.append("deb/%s/%s" % (arch, rel))
            carried[arch] = chosen
    except (bundle.BundleError, OSError) as err:
        module.fail_json(msg=problem("E_BUNDLE", "localhost", getattr(err, "what", str(err)),
                                     "Check the repository URL, the pinned version and the connection; run again."),
                         code="E_BUNDLE", fetched=fetched)
    module.exit_json(changed=bool(fetched), fetched=fetched, packages=carried, files=files)


if __name__ == "__main__":
    main()
