#!/usr/bin/env bash
# The whole product on simulated hardware: the real playbooks/site.yml against the demo inventory
# (inventories/demo), two simulated GPU boxes run as local containers, each with its own Docker
# engine, plus the Hub emulator and a gateway box (HAProxy and Prometheus from Debian's packages),
# on the docker network glm53-demo-net. Everything the boxes lack (GPUs, NVIDIA's repository,
# TensorFold's sources, the engine, the Hub) comes from the stand-ins under tests/. Sets itself up
# first (scripts/bootstrap.sh); run again, it reuses the boxes and changes nothing. Ends with the
# LIVE lines, the fleet report with the gateway's URL (reports/ in the checkout) and Prometheus'.
# tests/demo/check.py then checks the gateway, Prometheus' targets and the endpoint-down alert.
#   usage: scripts/demo.sh [extra ansible-playbook arguments, e.g. --tags restart]
#          scripts/demo.sh --destroy    remove the demo's boxes, Hub emulator, network and volumes
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BOXES=(glm53-demo-gpu1 glm53-demo-gpu2)
GATEWAY=glm53-demo-gateway

if [ "${1:-}" = "--destroy" ]; then
  # Only what the demo made: its named containers, their volumes and its network.
  for c in "${BOXES[@]}" "$GATEWAY" glm53-demo-hub; do
    docker rm -f "$c" >/dev/null 2>&1 && echo "[demo] removed container $c" || true
  done
  for c in "${BOXES[@]}"; do
    docker volume rm "$c-docker" >/dev/null 2>&1 && echo "[demo] removed volume $c-docker" || true
  done
  docker network rm glm53-demo-net >/dev/null 2>&1 && echo "[demo] removed network glm53-demo-net" || true
  exit 0
fi

bash scripts/bootstrap.sh
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_COLLECTIONS_PATH="$ROOT/.cache/collections"
# The stand-ins are found through this variable (the same one Molecule sets).
export MOLECULE_PROJECT_DIRECTORY="$ROOT"
# A converged run is a few lines a box: skipped tasks are not printed (PLAY RECAP still counts them),
# as in the example folders' ansible.cfg. ANSIBLE_DISPLAY_SKIPPED_HOSTS=true shows them.
export ANSIBLE_DISPLAY_SKIPPED_HOSTS="${ANSIBLE_DISPLAY_SKIPPED_HOSTS:-false}"
LOG="$ROOT/.cache/glm53-demo-boxes.log"
mkdir -p "$ROOT/.cache"
# The clients' API key: made once, readable by root only; the inventory reads it from this file.
KEY="$ROOT/.cache/glm53-demo/api-key"
if [ ! -s "$KEY" ]; then
  (umask 077 && mkdir -p "$(dirname "$KEY")" && python3 -c 'import secrets; print("demo-" + secrets.token_hex(16))' >"$KEY")
fi
echo "[demo] starting the simulated GPU boxes, the gateway box and the Hub emulator (log: $LOG)"
ansible-playbook -i inventories/demo tests/demo/boxes.yml >"$LOG" 2>&1 || { tail -40 "$LOG"; exit 1; }
echo "[demo] running playbooks/site.yml against inventories/demo"
rc=0
ansible-playbook -i inventories/demo playbooks/site.yml "$@" || rc=$?
ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$GATEWAY" 2>/dev/null | awk '{print $1}')
if [ -n "$ip" ]; then
  echo "[demo] gateway: http://$ip:8020/v1 (key: Authorization: Bearer \$(cat $KEY))"
  echo "[demo] Prometheus: http://$ip:9090 (targets: /targets, alerts: /alerts); check it all: python3 tests/demo/check.py"
fi
exit $rc
