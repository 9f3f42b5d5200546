#!/usr/bin/env python3
"""Build a signed stand-in of NVIDIA's apt repository for the NVIDIA Container Toolkit (tests only).

NVIDIA publishes the toolkit at https://nvidia.github.io/libnvidia-container/stable/deb/ARCH/ as
a flat apt repository (suite ``/``): ``Packages``, ``Release`` and a clearsigned ``InRelease``
next to the .deb files, signed with the key served at .../libnvidia-container/gpgkey (ASCII
armour). This script lays out the same thing under OUT:

    OUT/gpgkey                                  the test signing key (public, ASCII armour)
    OUT/stable/deb/amd64/{Packages,Packages.gz,Release,InRelease,*.deb}

with the toolkit's four packages at each VERSION (real names, versions and dependency shape:
nvidia-container-toolkit depends on nvidia-container-toolkit-base of the same version and on
libnvidia-container-tools, which depends on libnvidia-container1). Their contents stand in for
the real binaries: ``nvidia-ctk`` (see the nvidia-ctk stand-in's docstring),
``nvidia-container-runtime`` passing every call to runc, and small scripts for
``nvidia-container-cli`` and ``nvidia-container-runtime-hook``.

The signing key is generated for the run in GNUPGHOME (ed25519, no passphrase); it signs
nothing but this repository. Needs python3, dpkg-deb and gpg (all in the test base image).

``--with DEB`` also serves a real package beside them (a test box whose other sources are off
gets the distribution's python3-requests from here).

    usage: build_repo.py OUT VERSION [VERSION...] [--with DEB ...]
"""
import argparse
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ARCH = "amd64"
MAINTAINER = "glm53.tensorfold tests <tests@glm53.invalid>"


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)


def script(body):
    return "#!/bin/sh\n# Stand-in built by tests/standins/nvidia-toolkit-repo/build_repo.py (tests only).\n" + body


def packages(version):
    """name -> (depends, {path: (text, mode)}) for the four packages at version."""
    upstream = version.rsplit("-", 1)[0]
    with open(os.path.join(HERE, "nvidia-ctk")) as handle:
        ctk = handle.read().replace("@VERSION@", version)
    with open(os.path.join(HERE, "..", "nvidia-container-runtime")) as handle:
        runtime = handle.read()
    return {
        "libnvidia-container1": ("", {
            "usr/share/doc/libnvidia-container1/STANDIN": ("Test stand-in for libnvidia-container1 %s.\n" % version, 0o644)}),
        "libnvidia-container-tools": ("libnvidia-container1 (>= %s)" % version, {
            "usr/bin/nvidia-container-cli": (script('echo "cli-version: %s"\n' % upstream), 0o755)}),
        "nvidia-container-toolkit-base": ("", {
            "usr/bin/nvidia-ctk": (ctk, 0o755),
            "usr/bin/nvidia-container-runtime": (runtime, 0o755)}),
        "nvidia-container-toolkit": (
            "nvidia-container-toolkit-base (= %s), libnvidia-container-tools (>= %s), libnvidia-container-tools (<< 2.0.0)"
            % (version, version), {
                "usr/bin/nvidia-container-runtime-hook": (script("exit 0\n"), 0o755)}),
    }


def build_deb(pool, name, version, depends, files):
    work = tempfile.mkdtemp(prefix="standin-deb-")
    try:
        for rel, (text, mode) in files.items():
            write(os.path.join(work, rel), text, mode)
        control = ["Package: %s" % name, "Version: %s" % version, "Architecture: %s" % ARCH,
                   "Maintainer: %s" % MAINTAINER, "Section: utils", "Priority: optional"]
        if depends:
            control.append("Depends: %s" % depends)
        control.append("Description: test stand-in for NVIDIA's %s\n Built for the glm53.tensorfold tests; no GPU code inside." % name)
        write(os.path.join(work, "DEBIAN", "control"), "\n".join(control) + "\n")
        os.chmod(os.path.join(work, "DEBIAN"), 0o755)
        deb = os.path.join(pool, "%s_%s_%s.deb" % (name, version, ARCH))
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", work, deb],
                       check=True, stdout=subprocess.DEVNULL)
        return deb
    finally:
        shutil.rmtree(work)


def digest(path, algorithm):
    with open(path, "rb") as handle:
        return hashlib.new(algorithm, handle.read()).hexdigest()


def index_entry(deb):
    fields = subprocess.run(["dpkg-deb", "-f", deb], check=True, capture_output=True, text=True).stdout.rstrip("\n")
    return "%s\nFilename: ./%s\nSize: %d\nMD5sum: %s\nSHA256: %s\n" % (
        fields, os.path.basename(deb), os.path.getsize(deb), digest(deb, "md5"), digest(deb, "sha256"))


def main(argv):
    parser = argparse.ArgumentParser(usage=__doc__.rsplit("usage:", 1)[1].strip())
    parser.add_argument("out")
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--with", dest="extra", action="append", default=[])
    args = parser.parse_args(argv)
    out, versions, extra = args.out, args.versions, args.extra
    pool = os.path.join(out, "stable", "deb", ARCH)
    os.makedirs(pool, exist_ok=True)
    entries = []
    for version in versions:
        for name, (depends, files) in packages(version).items():
            entries.append(index_entry(build_deb(pool, name, version, depends, files)))
    for deb in extra:
        shutil.copy(deb, pool)
        entries.append(index_entry(os.path.join(pool, os.path.basename(deb))))
    index = "\n".join(entries)
    write(os.path.join(pool, "Packages"), index)
    with gzip.open(os.path.join(pool, "Packages.gz"), "wt") as handle:
        handle.write(index)
    sums = {"MD5Sum": "md5", "SHA256": "sha256"}
    release = ["Origin: glm53 stand-in of https://nvidia.github.io/libnvidia-container",
               "Label: libnvidia-container", "Architectures: %s" % ARCH,
               "Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime())]
    for field, algorithm in sums.items():
        release.append("%s:" % field)
        for name in ("Packages", "Packages.gz"):
            path = os.path.join(pool, name)
            release.append(" %s %d %s" % (digest(path, algorithm), os.path.getsize(path), name))
    write(os.path.join(pool, "Release"), "\n".join(release) + "\n")

    gnupghome = tempfile.mkdtemp(prefix="standin-gnupg-")
    try:
        gpg = ["gpg", "--batch", "--quiet", "--homedir", gnupghome]
        subprocess.run(gpg + ["--passphrase", "", "--quick-gen-key",
                              "glm53 test repository signing key <tests@glm53.invalid>", "ed25519", "sign", "never"],
                       check=True, stderr=subprocess.DEVNULL)
        subprocess.run(gpg + ["--yes", "--clearsign", "--output", os.path.join(pool, "InRelease"),
                              os.path.join(pool, "Release")], check=True)
        key = subprocess.run(gpg + ["--armor", "--export"], check=True, capture_output=True, text=True).stdout
        write(os.path.join(out, "gpgkey"), key)
    finally:
        subprocess.run(["gpgconf", "--homedir", gnupghome, "--kill", "all"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(gnupghome, ignore_errors=True)
    print("built %d packages for %s in %s" % (len(entries), ", ".join(versions), pool))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
