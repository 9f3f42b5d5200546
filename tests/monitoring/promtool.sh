#!/usr/bin/env bash
# The monitoring checks with Debian's promtool (package `prometheus`): the monitoring role
# renders prometheus.yml, the targets and the rules (render.yml), then `promtool check config`,
# `promtool check rules` and `promtool test rules` (each alert's firing and quiet series).
# Fast, no Docker. Run from the checkout's root with the project venv active (scripts/test.sh promtool).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/glm53-promtool.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
command -v promtool >/dev/null || { echo "promtool missing: apt-get install prometheus" >&2; exit 1; }
ansible-playbook -i "$HERE/hosts.yml" "$HERE/render.yml" -e "monitoring_config_dir=$OUT" >"$OUT.log" 2>&1 ||
  { cat "$OUT.log"; rm -f "$OUT.log"; exit 1; }
rm -f "$OUT.log"
promtool check config "$OUT/prometheus.yml"
promtool check rules "$OUT"/rules/*.yml
cp "$HERE/glm53-alerts.test.yml" "$OUT/"
promtool test rules "$OUT/glm53-alerts.test.yml"
# The targets come from the inventory: one per box, the box's own port, an IPv6 address in brackets.
python3 - "$OUT/file_sd" <<'PY'
import json, sys
engine = json.load(open(sys.argv[1] + "/glm53-engine.json"))
assert [t["targets"][0] for t in engine] == ["10.0.0.1:8020", "10.0.0.2:8020", "[fd00::3]:8021"], engine
assert [t["labels"]["box"] for t in engine] == ["box-a", "box-b", "box-c"], engine
node = json.load(open(sys.argv[1] + "/glm53-node.json"))
assert [t["targets"][0] for t in node] == ["10.0.0.1:9100", "10.0.0.2:9100", "[fd00::3]:9101"], node
gateway = json.load(open(sys.argv[1] + "/glm53-gateway.json"))
assert [(t["labels"]["gateway"], t["targets"][0]) for t in gateway] == [("gw", "[fd00::9]:8404"), ("gw-b", "10.0.0.8:9404")], gateway
print("file_sd targets: 3 engines, 3 node exporters (each at its own port), 2 gateways (each at its own stats port)")
PY
# The measured speeds: the baselines file's for box-c, the setting's over it for box-a, none for a
# box the inventory no longer has.
python3 - "$OUT/rules/glm53-records.yml" <<'PY'
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))["groups"][0]["rules"]
measured = dict((r["labels"]["box"], r["expr"]) for r in rules if r.get("record") == "glm53:measured_tokens_per_stream")
assert measured == {"box-a": "vector(100)", "box-b": "vector(100)", "box-c": "vector(50.0)"}, measured
print("measured speeds: box-a 100, box-b 100, box-c 50")
PY
