"""The nvidia_toolkit role's driver check (E_DRIVER), run for real on localhost.

ansible-playbook runs the role with --check --tags check (read-only: the driver query and
`docker info`) against localhost, with tests/standins/nvidia-toolkit-driver/nvidia-smi first on
PATH (see its docstring: it replays the recorded driver version 580.159.04, or another version,
or the real tool's failure when the kernel module is missing).
"""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STANDIN = os.path.join(ROOT, "tests", "standins", "nvidia-toolkit-driver")
PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: true
  roles:
    - glm53.tensorfold.nvidia_toolkit
"""


def run_check(tmp_path, with_standin=True, **standin_env):
    playbook = tmp_path / "check.yml"
    playbook.write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".cache", "collections")))
    if with_standin:
        env["PATH"] = STANDIN + os.pathsep + env["PATH"]
    env.update(standin_env)
    result = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "--check", "--tags", "check",
         "-e", "ansible_python_interpreter=" + sys.executable, str(playbook)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)  # failures are the point
    return result.stdout + result.stderr


def test_recorded_cuda13_driver_passes_the_driver_check(tmp_path):
    output = run_check(tmp_path)
    assert "[E_DRIVER]" not in output
    # the play went past the driver check to the runtime check (which reads this host's Docker)
    assert "TASK [glm53.tensorfold.nvidia_toolkit : Ask Docker whether its daemon answers and which runtimes it has]" in output


def test_driver_older_than_580_is_named(tmp_path):
    output = run_check(tmp_path, STANDIN_DRIVER_VERSION="570.86.15")
    assert "[E_DRIVER] localhost: driver 570.86.15 is older than 580, the first driver for" in " ".join(output.split())


def test_failing_nvidia_smi_is_reported_with_its_message(tmp_path):
    output = " ".join(run_check(tmp_path, STANDIN_NVIDIA_SMI_FAIL="1").split())
    assert "[E_DRIVER] localhost: nvidia-smi did not report a driver (exit 9: NVIDIA-SMI has failed" in output


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has a real nvidia-smi")
def test_missing_nvidia_smi_means_no_driver(tmp_path):
    output = " ".join(run_check(tmp_path, with_standin=False).split())
    assert "[E_DRIVER] localhost: nvidia-smi cannot be run here: no NVIDIA driver is installed" in output
