#!/usr/bin/env bash
# The main job on an embedded default: the real playbooks/site.yml against the demo inventory
# (inventories/demo), two simulated GPU boxes run as local containers. Sets itself up first and
# reuses the boxes when run again. Ends with the host-check fleet summary.
#   usage: scripts/demo.sh [extra ansible-playbook arguments, e.g. --tags check]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/bootstrap.sh
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_COLLECTIONS_PATH="$ROOT/.cache/collections"
# molecule/resources/tasks/start_docker.yml finds the stand-ins through this variable.
export MOLECULE_PROJECT_DIRECTORY="$ROOT"
echo "[demo] starting the simulated GPU boxes"
ansible-playbook -i inventories/demo tests/demo/boxes.yml \
  -l 'localhost,gpu_hosts' >/tmp/glm53-demo-boxes.log || { tail -40 /tmp/glm53-demo-boxes.log; exit 1; }
echo "[demo] running playbooks/site.yml against inventories/demo"
exec ansible-playbook -i inventories/demo playbooks/site.yml "$@"
