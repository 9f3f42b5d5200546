"""The monitoring role's API key file follows tensorfold_api_key: written (root's, Prometheus'
group reads it) while a key is set, removed once it is unset, as the gateway role does with its key
map. Renders with tests/monitoring/render.yml (promtool validates the files, as on a real host)."""

import os

from ansible_run import ROOT, run_playbook

MONITORING = os.path.join(ROOT, "tests", "monitoring")


def test_the_key_file_goes_when_the_key_is_unset(tmp_path):
    key_file = tmp_path / "glm53-api-key"
    render = [os.path.join(MONITORING, "render.yml"), os.path.join(MONITORING, "hosts.yml")]
    rc, output = run_playbook(render[0], render[1], tmp_path, ["-e", "monitoring_config_dir=%s" % tmp_path])
    assert rc == 0, output[-3000:]
    assert key_file.read_text() == "promtool-test-key\n"
    rc, output = run_playbook(render[0], render[1], tmp_path, ["-e", "monitoring_config_dir=%s" % tmp_path,
                                                               "-e", "tensorfold_api_key="])
    assert rc == 0, output[-3000:]
    assert not key_file.exists()
    assert "credentials_file" not in (tmp_path / "prometheus.yml").read_text()
