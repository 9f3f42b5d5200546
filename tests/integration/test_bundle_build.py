"""playbooks/bundle.yml on the controller, end to end, without Docker (the image part is skipped):
built from the Hub emulator and a stand-in of NVIDIA's repository, a flipped byte named by
--tags verify and repaired by the next build (the weights file is fetched again), then built again
with the tarball, its only change (no Hub request), and once more with nothing changed."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.dirname(sys.executable)
STANDINS = os.path.join(ROOT, "tests", "standins")



@pytest.fixture(autouse=True)
def repository_tools_installed():
    """The stand-in NVIDIA repository needs gpg and dpkg-deb: a missing one fails these tests
    (scripts/bootstrap.sh installs them)."""
    missing = [tool for tool in ("gpg", "dpkg-deb") if not shutil.which(tool)]
    assert not missing, "missing %s: apt-get install gnupg dpkg (scripts/bootstrap.sh)" % missing


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("bundle"))
    subprocess.run([sys.executable, os.path.join(STANDINS, "hub", "make_repos.py"), os.path.join(work, "repos"),
                    "--shards", "2", "--shard-mib", "1"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(STANDINS, "nvidia-toolkit-repo", "build_repo.py"),
                    os.path.join(work, "nvidia-repo"), "1.18.1-1", "1.18.2-1"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, GNUPGHOME=tempfile.mkdtemp(dir=work)))
    port = free_port()
    log = os.path.join(work, "hub.jsonl")
    hub = subprocess.Popen([sys.executable, os.path.join(STANDINS, "hub", "hub_emulator.py"), "--root",
                            os.path.join(work, "repos"), "--port", str(port), "--log", log],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _attempt in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        inventory = os.path.join(work, "hosts.yml")
        with open(inventory, "w") as handle:
            json.dump({"all": {"hosts": {"localhost": {
                "ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
                "vars": {
                    "tensorfold_bundle": os.path.join(work, "bundle"),
                    "tensorfold_hf_endpoint": "http://127.0.0.1:%d" % port,
                    "tensorfold_drafter": "dflash2",
                    "bundle_toolkit_apt_repo_url": "file://%s/nvidia-repo/stable/deb" % work,
                    "bundle_toolkit_gpg_key_url": "file://%s/nvidia-repo/gpgkey" % work,
                    "bundle_hf_client_targets": ["cp%d%d-x86_64" % sys.version_info[:2]],
                    "bundle_pip_requirements": []}}}, handle)
        yield {"work": work, "inventory": inventory, "log": log, "bundle": os.path.join(work, "bundle")}
    finally:
        hub.terminate()
        hub.wait()


def bundle_yml(site, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    started = time.time()
    run = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", site["inventory"],
                          os.path.join(ROOT, "playbooks", "bundle.yml")] + list(args),
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         check=False)
    recap = re.search(r"(?m)^localhost\s+: ok=\d+\s+changed=(\d+)", run.stdout)
    # one line per message: the YAML callback folds long strings
    return run.returncode, int(recap.group(1)) if recap else -1, " ".join(run.stdout.split()), time.time() - started


def hub_requests(site):
    with open(site["log"]) as handle:
        return len(handle.readlines())


def test_build_rebuild_verify_corrupt_repair(site):
    rc, changed, out, took = bundle_yml(site, "--skip-tags", "image")
    assert rc == 0 and changed > 0, out[-3000:]
    print("first build (no image): %.1f s" % took)
    with open(os.path.join(site["bundle"], "MANIFEST.json")) as handle:
        manifest = json.load(handle)
    items = manifest["items"]
    assert {"weights/model", "weights/drafter", "toolkit", "python/hf-client", "collection"} <= set(items)
    assert items["weights/model"]["meta"]["revision"] == "078455ffe6472f9a52fbc1139f58b9db2881b25c"
    assert all(len(f["sha256"]) == 64 for item in items.values() for f in item["files"])
    debs = sorted(f["path"] for f in items["toolkit"]["files"] if f["path"].endswith(".deb"))
    assert debs and all("1.18.2-1" in d for d in debs)  # only the pinned version
    assert "not built yet: image, image-series" in out, out[out.find("Show the bundle"):][:600]
    assert manifest["missing"] == ["image", "image-series"]
    assert manifest["meta"]["collection_version"] == items["collection"]["meta"]["version"]
    tarball = items["collection"]["files"][0]["path"]
    names = subprocess.run(["tar", "-tzf", os.path.join(site["bundle"], "collection", tarball)], stdout=subprocess.PIPE,
                           universal_newlines=True, check=True).stdout.split()
    assert "roles/bundle/tasks/build.yml" in names and "MANIFEST.json" in names
    assert not [n for n in names if n.split("/")[0] in (".gitignore", "ansible.cfg", ".venv", ".cache", "molecule", "scripts")]

    shard = sorted(f["path"] for f in items["weights/model"]["files"] if f["path"].endswith(".safetensors"))[0]
    path = os.path.join(site["bundle"], "weights", "model", shard)
    os.chmod(path, 0o644)
    with open(path, "r+b") as handle:
        handle.seek(10)
        byte = handle.read(1)
        handle.seek(10)
        handle.write(bytes([byte[0] ^ 1]))
    rc, changed, out, took = bundle_yml(site, "--tags", "verify")
    assert rc != 0 and "[E_BUNDLE]" in out and "weights/model: %s sha256 differs" % shard in out

    rc, changed, out, took = bundle_yml(site, "--tags", "weights")
    assert rc == 0 and changed > 0, out[-3000:]
    # Repaired, but built without the image part: verify names what is not built, and only that.
    rc, changed, out, took = bundle_yml(site, "--tags", "verify")
    assert rc != 0 and "image is not in the bundle (not built yet)" in out, out[-3000:]
    assert "image-series is not in the bundle (not built yet)" in out and "sha256 differs" not in out, out[-3000:]
    print("verify after the repair: %.1f s" % took)

    # The whole build again, now with the tarball: the tarball is its only change, and a complete
    # pinned snapshot asks the Hub nothing. (The same build without the tarball, changed=0, is
    # the airgapped scenario's second build, with the image part too.)
    # The bundle folder named with a trailing / (as shells complete it): the tarball still goes beside it.
    asked = hub_requests(site)
    rc, changed, out, took = bundle_yml(site, "--skip-tags", "image", "-e", "bundle_tarball=true",
                                        "-e", "tensorfold_bundle=%s/" % site["bundle"])
    assert rc == 0 and changed == 1, out[-3000:]
    assert not os.path.exists(os.path.join(site["bundle"], ".tar"))
    assert hub_requests(site) == asked
    print("second build, with the tarball: changed=1, 0 Hub requests, %.1f s" % took)
    names = subprocess.run(["tar", "-tf", site["bundle"] + ".tar"], stdout=subprocess.PIPE, universal_newlines=True,
                           check=True).stdout.split()
    assert "./MANIFEST.json" in names and not [n for n in names if n.startswith("./.state")]
    rc, changed, out, took = bundle_yml(site, "--skip-tags", "image", "-e", "bundle_tarball=true")
    assert rc == 0 and changed == 0, out[-3000:]


def own_module_pids(marker):
    """Module processes of this test's runs (Ansible's workers setsid them): their environment names marker."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as handle:
                if marker.encode() in handle.read():
                    pids.append(int(pid))
        except OSError:
            continue
    return pids


def test_a_killed_build_resumes(site):
    """The weights part killed mid-way (the playbook and its module): the next build fetches only what is missing."""
    bundle = os.path.join(site["work"], "killed")
    port = re.search(r":(\d+)$", json.load(open(site["inventory"]))["all"]["vars"]["tensorfold_hf_endpoint"]).group(1)
    req = "curl -fsS -X POST -d '{\"throttle_bps\": 1048576}' http://127.0.0.1:%s/_emulator/faults" % port
    assert subprocess.run(req, shell=True, check=False).returncode == 0
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    run = subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", site["inventory"], "-e", "tensorfold_bundle=" + bundle,
                            os.path.join(ROOT, "playbooks", "bundle.yml"), "--tags", "weights"],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    files = os.path.join(bundle, "weights", "model", "files")
    deadline = time.time() + 120
    while time.time() < deadline and not (os.path.isdir(files) and any(n.endswith(".safetensors") for n in os.listdir(files))):
        time.sleep(0.2)
    landed = sorted(n for n in os.listdir(files) if n.endswith(".safetensors"))
    os.killpg(run.pid, 9)
    run.wait()
    for pid in own_module_pids(os.path.join(bundle, ".state")):
        os.kill(pid, 9)
    assert landed, "no shard landed before the kill"
    subprocess.run("curl -fsS -X POST -d '{}' http://127.0.0.1:%s/_emulator/faults" % port, shell=True, check=False)
    with open(site["log"]) as handle:
        before = len(handle.readlines())
    rc, changed, out, _took = bundle_yml(site, "-e", "tensorfold_bundle=" + bundle, "--tags", "weights")
    assert rc == 0 and changed > 0, out[-3000:]
    with open(site["log"]) as handle:
        asked = [json.loads(line).get("path", "") for line in handle.readlines()[before:]]
    assert not [p for p in asked if p.endswith(landed[0])], "a shard that had landed was fetched again"
    rc, changed, out, _took = bundle_yml(site, "-e", "tensorfold_bundle=" + bundle, "--tags", "weights")
    assert rc == 0 and changed == 0, out[-3000:]


def test_check_mode_on_a_new_folder_writes_nothing_and_says_what_it_would_build(site):
    bundle = os.path.join(site["work"], "checked")
    asked = hub_requests(site) if os.path.exists(site["log"]) else 0
    rc, changed, out, _took = bundle_yml(site, "-e", "tensorfold_bundle=" + bundle, "--check")
    assert rc == 0, out[-3000:]
    assert not os.path.exists(bundle)
    assert (hub_requests(site) if os.path.exists(site["log"]) else 0) == asked
    assert "would build image, image-series, toolkit, python/hf-client, weights/model, weights/drafter, collection," in out, out[-3000:]
