"""The rendered Dockerfile built for real with docker buildx (BuildKit), up to the builder stage's
failing step, and the build's output read into its code as the image_build action reads it.

Needs the buildx plugin (``docker buildx version``; DOCKER_CONFIG may point at a folder whose
cli-plugins/ holds it) and the local base image glm53-test/image-base; skipped without them.
Nothing is pulled and no image is left behind (every build here fails or stops at the builder
stage with --output type=cacheonly). The builds that get past the Zig step fetch the TensorFold source stand-ins
(tests/standins/tensorfold_source/make_standins.sh) from a loopback HTTP server (--network host).
"""

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading

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


STANDINS = os.path.join(ROOT, "tests", "standins", "tensorfold_source")


def build(tmp_path, patches=(), network="none", **args):
    """Build the builder stage of the rendered Dockerfile; ``patches``: (name, bytes) in series order."""
    with open(TEMPLATE) as handle:
        text = jinja2.Template(handle.read(), keep_trailing_newline=True).render(tensorfold_image_engine_build_command="sh build.sh")
    (tmp_path / "patches").mkdir()
    for name, data in patches:
        (tmp_path / "patches" / name).write_bytes(data)
    (tmp_path / "patches" / "series").write_text("".join(name + "\n" for name, _ in patches))
    (tmp_path / "Dockerfile").write_text(text)
    # cacheonly: a stage that builds leaves no (dangling) image behind, only BuildKit's cache.
    command = ["docker", "buildx", "build", "--progress=plain", "--output", "type=cacheonly", "--network", network, "--target", "builder",
               "--build-arg", "BUILDER_IMAGE=" + BASE, "--build-arg", "RUNTIME_IMAGE=" + BASE]
    for name, value in args.items():
        command += ["--build-arg", "%s=%s" % (name, value)]
    return subprocess.run(command + [str(tmp_path)], capture_output=True, text=True, check=False, timeout=300)


def problem_of(done, commit=""):
    assert done.returncode != 0, done.stderr[-3000:]
    return build_problem({"failed": True, "msg": "Error building", "stderr": done.stderr, "stdout": done.stdout}, "gpu-a", commit)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The stand-ins on a loopback HTTP server: the build arguments that fetch them, and the series."""
    dest = tmp_path_factory.mktemp("standins") / "standins"
    subprocess.run(["bash", os.path.join(STANDINS, "make_standins.sh"), str(dest)], check=True, capture_output=True)
    pins = dict(line.split("=", 1) for line in (dest / "pins.env").read_text().split())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(dest))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = "http://127.0.0.1:%d" % server.server_address[1]
    series = [(name, (dest / "patch-series" / "patches" / name).read_bytes())
              for name in sorted(os.listdir(dest / "patch-series" / "patches"))]
    yield {"args": dict(ZIG_VERSION="0.17.0", ZIG_URL=base + "/zig-x86_64-linux-0.17.0.tar.xz", ZIG_SHA256=pins["ZIG_SHA256"],
                        TENSORFOLD_REPO=base + "/tensorfold.git", TENSORFOLD_COMMIT=pins["ENGINE_COMMIT"],
                        TENSORFOLD_KERNELS="/opt/tensorfold/kernels/sm_120"),
           "series": series}
    server.shutdown()
    shutil.rmtree(str(dest), ignore_errors=True)


def test_an_unreachable_zig_url_is_an_e_download_not_a_checksum_mismatch(tmp_path):
    """curl fails (connection refused, exit 7): the cause is the download, not the pinned sha256."""
    done = build(tmp_path, ZIG_VERSION="0.17.0", ZIG_URL="http://127.0.0.1:9/zig-x86_64-linux-0.17.0.tar.xz",
                 ZIG_SHA256="ab" * 32)
    message = problem_of(done)
    assert message.startswith("[E_DOWNLOAD] gpu-a: could not download http://127.0.0.1:9/zig-x86_64-linux-0.17.0.tar.xz "
                              "(curl exit code 7"), message + "\n" + done.stderr[-3000:]
    assert "sha256" not in message


def test_an_unreachable_tensorfold_repository_is_an_e_download(served, tmp_path):
    """A commit the mirror in BuildKit's cache lacks is fetched; the fetch and the fresh clone fail."""
    args = dict(served["args"], TENSORFOLD_REPO="http://127.0.0.1:9/tensorfold.git", TENSORFOLD_COMMIT="1" * 40)
    message = problem_of(build(tmp_path, network="host", **args))
    assert message.startswith("[E_DOWNLOAD] gpu-a: could not clone http://127.0.0.1:9/tensorfold.git"), message


def test_the_series_applies_and_the_stage_builds(served, tmp_path):
    """The stand-in series applies in order: the build passes the patch step and the engine checks."""
    done = build(tmp_path, patches=served["series"], network="host", **served["args"])
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_patch_converted_to_crlf_is_named_with_why(served, tmp_path):
    """git apply keeps a patch's CRs (GNU patch strips them): a patch whose lines were converted to
    CRLF on the way does not apply to the LF source, and the message says why."""
    series = list(served["series"])
    name, data = series[1]
    series[1] = (name, data.replace(b"\n", b"\r\n"))
    commit = served["args"]["TENSORFOLD_COMMIT"]
    message = problem_of(build(tmp_path, patches=series, network="host", **served["args"]), commit)
    assert message.startswith("[E_PATCHES] gpu-a: patch %s does not apply cleanly on TensorFold %s after the patches "
                              "before it (its lines end in CRLF: git apply, unlike GNU patch, keeps the CRs" % (name, commit[:12])), message


def test_a_patch_that_needs_fuzz_is_refused(served, tmp_path):
    """The no-fuzz rule, as real git apply holds it: a context line that differs refuses the patch
    (GNU patch 2.7 applies a hunk with up to 2 differing context lines, "with fuzz")."""
    first, data = served["series"][0]
    fuzzy = data.replace(b" stand-in TensorFold source\n", b" stand-in TensorFold sourcE\n")
    assert fuzzy != data
    message = problem_of(build(tmp_path, patches=[(first, fuzzy)], network="host", **served["args"]))
    assert message.startswith("[E_PATCHES] gpu-a: patch %s does not apply cleanly" % first), message
    assert "CRLF" not in message
