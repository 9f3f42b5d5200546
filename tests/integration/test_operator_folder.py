"""The operator's folder (inventories/example): site.yml, hosts and requirements.yml, used the way
the README says, against the collection built and installed from this checkout.

The collection is built with ansible-galaxy and installed into a fresh collections path; the
folder is copied elsewhere (it must not need this checkout), and ansible-playbook runs
`site.yml -i hosts` there. A check-mode run on localhost (as a one-box fleet with no GPUs) must
go through pre-flight and stop at the host checks with a coded problem, then print the report.
"""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from ansible_run import ROOT  # noqa: E402

BIN = os.path.dirname(sys.executable)
FOLDER = os.path.join(ROOT, "inventories", "example")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("galaxy")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(work), ROOT],
                   check=True, capture_output=True, text=True)
    tarball = glob.glob(str(work / "glm53-tensorfold-*.tar.gz"))[0]
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force",
                    "-p", str(work / "collections"), tarball], check=True, capture_output=True, text=True)
    return work / "collections", tarball


def run(folder, collections, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="yaml")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "site.yml", "-i", "hosts"] + list(args),
                          cwd=str(folder), env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_folder_is_a_site_yml_a_hosts_inventory_and_a_requirements_file():
    with open(os.path.join(FOLDER, "site.yml")) as handle:
        plays = yaml.safe_load(handle)
    assert plays == [{"name": plays[0]["name"], "ansible.builtin.import_playbook": "glm53.tensorfold.site"}]
    with open(os.path.join(FOLDER, "requirements.yml")) as handle:
        assert [c["name"] for c in yaml.safe_load(handle)["collections"]] == ["glm53.tensorfold"]


def test_the_tarball_holds_what_users_run_and_none_of_the_stand_ins(installed):
    _, tarball = installed
    names = subprocess.run(["tar", "-tzf", tarball], check=True, capture_output=True, text=True).stdout.split()
    assert "playbooks/site.yml" in names and "roles/step/tasks/main.yml" in names
    assert not [n for n in names if n.startswith(("tests/standins", "tests/integration", "tests/demo", "molecule"))]


def test_site_yml_in_a_copy_of_the_folder_passes_the_syntax_check(installed, tmp_path):
    folder = tmp_path / "mysite"
    shutil.copytree(FOLDER, str(folder))
    rc, output = run(folder, installed[0], "--syntax-check")
    assert rc == 0, output


def test_a_check_mode_run_on_a_box_without_gpus_stops_at_the_host_checks_and_reports(installed, tmp_path):
    folder = tmp_path / "mysite"
    shutil.copytree(FOLDER, str(folder))
    (folder / "hosts").write_text("gpu_hosts:\n  hosts:\n    box-01:\n      ansible_connection: local\n"
                                  "      ansible_python_interpreter: %s\n" % sys.executable)
    # The example's image pins are placeholders an operator fills in; these pass the format checks.
    rc, output = run(folder, installed[0], "--check", "-e", "tensorfold_image_engine_commit=" + "a" * 40,
                     "-e", "tensorfold_image_patch_series_repo=https://git.example.invalid/series.git",
                     "-e", "tensorfold_image_patch_series_commit=" + "b" * 40)
    assert rc != 0
    assert "box-01 failed in gpu_host_checks: see its line in the fleet report" in output, output
    with open(str(folder / "reports" / "fleet-report.json")) as handle:
        line = json.load(handle)["hosts"][0]
    assert (line["host"], line["status"], line["stage"]) == ("box-01", "failed", "gpu_host_checks"), line
    assert line["codes"] and all(code.startswith(("E_", "W_")) for code in line["codes"]), line
