"""The rendered Dockerfile built for real with docker buildx (BuildKit), up to the builder stage's
failing step, and the build's output read into its code as the image_build action reads it.

Needs the buildx plugin (``docker buildx version``; DOCKER_CONFIG may point at a folder whose
cli-plugins/ holds it) and the local base image glm53-test/image-base; skipped without them.
Nothing is pulled: the build runs with --network none and never tags an image (it fails).
"""

import os
import subprocess
import sys

import jinja2
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, ".cache", "collections"))

from ansible_collections.glm53.tensorfold.plugins.module_utils.image_inputs import build_problem  # noqa: E402

TEMPLATE = os.path.join(ROOT, "templates", "Dockerfile.j2")
BASE = "glm53-test/image-base"


def _available():
    try:
        buildx = subprocess.run(["docker", "buildx", "version"], capture_output=True, check=False, timeout=30)
        base = subprocess.run(["docker", "image", "inspect", BASE], capture_output=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return buildx.returncode == 0 and base.returncode == 0


pytestmark = pytest.mark.skipif(not _available(), reason="needs docker buildx and the local image %s" % BASE)


def build(tmp_path, **args):
    with open(TEMPLATE) as handle:
        text = jinja2.Template(handle.read(), keep_trailing_newline=True).render(tensorfold_image_engine_build_command="true")
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "series").write_text("")
    (tmp_path / "Dockerfile").write_text(text)
    command = ["docker", "buildx", "build", "--progress=plain", "--network", "none", "--target", "builder",
               "--build-arg", "BUILDER_IMAGE=" + BASE, "--build-arg", "RUNTIME_IMAGE=" + BASE]
    for name, value in args.items():
        command += ["--build-arg", "%s=%s" % (name, value)]
    return subprocess.run(command + [str(tmp_path)], capture_output=True, text=True, check=False, timeout=300)


def test_an_unreachable_zig_url_is_an_e_download_not_a_checksum_mismatch(tmp_path):
    """curl fails (connection refused, exit 7): the cause is the download, not the pinned sha256."""
    done = build(tmp_path, ZIG_VERSION="0.17.0", ZIG_URL="http://127.0.0.1:9/zig-x86_64-linux-0.17.0.tar.xz",
                 ZIG_SHA256="ab" * 32)
    assert done.returncode != 0
    message = build_problem({"failed": True, "msg": "Error building", "stderr": done.stderr, "stdout": done.stdout}, "gpu-a")
    assert message.startswith("[E_DOWNLOAD] gpu-a: could not download http://127.0.0.1:9/zig-x86_64-linux-0.17.0.tar.xz "
                              "(curl exit code 7"), message + "\n" + done.stderr[-3000:]
    assert "sha256" not in message
