"""The Grafana dashboard shipped with the monitoring role imports without edits: its datasource
is a dashboard variable (no ${DS_...} import inputs to fill in), every query is valid PromQL
(promtool checks it) and reads only series the collection's rules or scrape jobs provide."""

import json
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "monitoring")
DASHBOARD = os.path.join(ROLE, "files", "grafana", "glm53-fleet.json")
RECORDS = os.path.join(ROLE, "templates", "glm53-records.yml.j2")
# Series Prometheus gets straight from a scrape job (not recorded by the collection).
SCRAPED = {"up", "node_filesystem_avail_bytes", "node_filesystem_size_bytes", "glm53_data_dir_info"}


def load():
    with open(DASHBOARD) as handle:
        return json.load(handle)


def exprs(dashboard):
    found = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    found += [v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)]
    return found


def test_imports_without_edits():
    dashboard = load()
    text = open(DASHBOARD).read()
    assert "__inputs" not in dashboard and "${DS_" not in text
    assert dashboard["uid"] == "glm53-fleet" and dashboard.get("id") is None
    variables = dict((v["name"], v) for v in dashboard["templating"]["list"])
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"


def test_per_box_panels_for_requests_tokens_queue_and_gpu_memory():
    titles = " ".join(p["title"].lower() for p in load()["panels"])
    for word in ("requests", "tokens", "queue", "gpu memory"):
        assert word in titles
    for expr in exprs(load())[:-1]:
        assert "box" in expr


def test_queries_read_only_series_the_collection_provides():
    recorded = set(re.findall(r"record: (\S+)", open(RECORDS).read()))
    for expr in exprs(load()):
        names = set(re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{|$|\s|\))", expr))
        names -= {"by", "on", "group_left", "max", "sum", "label_values", "box", "path", "mountpoint"}
        unknown = [n for n in names if n not in recorded and n not in SCRAPED]
        assert not unknown, (expr, unknown)


def test_every_query_is_valid_promql(tmp_path):
    assert shutil.which("promtool"), "promtool is missing: apt-get install prometheus (scripts/bootstrap.sh)"
    rules = ["groups:", "  - name: dashboard", "    rules:"]
    for number, expr in enumerate(exprs(load())[:-1]):
        rules += ["      - record: dashboard:q%d" % number,
                  "        expr: %s" % json.dumps(expr.replace("$box", ".*"))]
    (tmp_path / "dashboard.yml").write_text("\n".join(rules) + "\n")
    done = subprocess.run(["promtool", "check", "rules", str(tmp_path / "dashboard.yml")], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
