"""A check run (--check --diff) of the node exporter step on a box that does not have the package
yet (this controller: Debian's prometheus-node-exporter is in its package lists, not installed).
The package would be installed, so its service does not exist yet: the run says what it would do
(the exporter's port in Debian's /etc/default file among it) and does not fail on the service.
Skipped where the package is installed or not known to apt."""

import os
import subprocess
import sys
import textwrap

import pytest

from ansible_run import run_playbook


def node_exporter_installable():
    """True when apt knows the package and it is not installed."""
    try:
        policy = subprocess.run(["apt-cache", "policy", "prometheus-node-exporter"], capture_output=True,
                                text=True, check=False).stdout
    except OSError:
        return False
    return "Candidate:" in policy and "Installed: (none)" in policy


@pytest.mark.skipif(not node_exporter_installable(), reason="needs prometheus-node-exporter known to apt, not installed")
def test_a_check_run_on_a_box_without_the_node_exporter_does_not_fail(tmp_path):
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          children:
            gpu_hosts:
              hosts:
                box-a: {{ansible_connection: local, ansible_python_interpreter: {python}}}
            monitoring:
              hosts:
                prometheus-01:
        """).format(python=sys.executable))
    (tmp_path / "node_exporter.yml").write_text(textwrap.dedent("""\
        - hosts: gpu_hosts
          gather_facts: false
          vars: {{tensorfold_data_dir: {data}, monitoring_textfile_dir: {textfile}, monitoring_node_exporter_port: 9200}}
          tasks:
            - ansible.builtin.import_role: {{name: glm53.tensorfold.monitoring, tasks_from: node_exporter}}
        """).format(data=tmp_path / "data", textfile=tmp_path / "textfile"))
    rc, output = run_playbook(tmp_path / "node_exporter.yml", tmp_path / "hosts.yml", tmp_path, ["--check", "--diff"])
    assert rc == 0, output[-3000:]
    assert "Could not find the requested service" not in output
    # The exporter listens where Prometheus scrapes it and reads the folder the boxes write to (Debian's
    # unit: prometheus-node-exporter $ARGS), restarted when that changes.
    assert '+ARGS="--web.listen-address=:9200 --collector.textfile.directory=%s"' % (tmp_path / "textfile") in output
    assert "RUNNING HANDLER [glm53.tensorfold.monitoring : Restart prometheus-node-exporter]" in output
    assert not os.path.exists(str(tmp_path / "data"))  # check mode wrote nothing
