#!/usr/bin/env bash
# Benchmarks (not tests): each section prints figures. Sections:
#   host-checks   the host checks (site.yml --tags check) on 1 and on 8 simulated boxes, in one
#                 run; prints both wall times and their ratio (goal: 8 hosts within 2x of 1).
#   weights       hf_snapshot against plain `hf download` on the Hub emulator (loopback): the
#                 throughput ratio (goal >= 0.95), bytes re-fetched after a kill -9, shard bytes
#                 read by a re-run of a complete snapshot.
#   site          site.yml on simulated boxes (the demo's settings and stand-ins): the no-op
#                 converge (second full run, nothing to change) for 1 and for 4 hosts and their
#                 ratio, and a `--tags restart` of one host minus the engine stand-in's own start
#                 (its "loaded in N s" in rank0.log): the
#                 playbook's own overhead for a restart. Makes and then removes its own boxes
#                 (glm53-bench-gpu1..4, glm53-bench-hub, glm53-bench-net); ~5 min.
#   usage: scripts/bench.sh [SECTION...]   (default: every section)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/bootstrap.sh >/dev/null
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_COLLECTIONS_PATH="$ROOT/.cache/collections" ANSIBLE_NOCOLOR=1

wall() {  # wall COMMAND...: run it quietly, print its wall time in seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/tmp/glm53-bench-last.log 2>&1 || { tail -30 /tmp/glm53-bench-last.log >&2; return 1; }
  t1=$(date +%s.%N)
  python3 -c "print('%.1f' % ($t1 - $t0))"
}

bench_host_checks() {
  # Eight boxes of the base image with the stand-in nvidia-smi (healthy two-card profile), reached
  # through the docker connection. They run no Docker engine of their own, so the Docker checks
  # are off; report-only, so every host runs every check.
  local n boxes=() inv
  inv=$(mktemp -d /tmp/glm53-bench-inv.XXXXXX)
  for n in 1 2 3 4 5 6 7 8; do boxes+=("glm53-bench-hc$n"); done
  trap 'docker rm -f "${boxes[@]}" >/dev/null 2>&1 || true; rm -rf "$inv"' RETURN
  {
    echo "gpu_hosts:"; echo "  hosts:"
    for n in "${boxes[@]}"; do echo "    $n: {}"; done
    echo "  vars:"
    echo "    ansible_connection: community.docker.docker"
    echo "    ansible_python_interpreter: /usr/bin/python3"
    echo "    ansible_pipelining: true"
    echo "    gpu_host_checks_docker: false"
    echo "    gpu_host_checks_fail: false"
    echo "    gpu_host_checks_disk_checkpoint_gib: 1"
    echo "    gpu_host_checks_disk_drafter_gib: 1"
    echo "    gpu_host_checks_disk_image_gib: 1"
    echo "    gpu_host_checks_min_host_memory_gib: 0.5"
  } >"$inv/hosts.yml"
  printf '{"count": 2, "memory_used_mib": 2, "p2p": "OK"}\n' >"$inv/profile.json"
  for n in "${boxes[@]}"; do
    docker run -d --name "$n" glm53-test/debian12:latest sleep infinity >/dev/null
    docker cp tests/standins/nvidia-smi "$n:/usr/bin/nvidia-smi"
    docker exec "$n" mkdir -p /etc/glm53-sim
    docker cp "$inv/profile.json" "$n:/etc/glm53-sim/gpu-profile.json"
  done
  local one eight
  # A first run warms caches (Python bytecode, the controller's plugin loading) for both.
  wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml --tags check -l "${boxes[0]}" >/dev/null
  one=$(wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml --tags check -l "${boxes[0]}")
  eight=$(wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml --tags check)
  grep -c ': pass' /tmp/glm53-bench-last.log >/dev/null || true
  echo "host-checks: 1 host ${one}s, 8 hosts ${eight}s, ratio $(python3 -c "print('%.2f' % ($eight / $one))") (goal <= 2.00)"
}

bench_site() {
  local n boxes=() inv
  inv=$(mktemp -d /tmp/glm53-bench-site.XXXXXX)
  for n in 1 2 3 4; do boxes+=("glm53-bench-gpu$n"); done
  # shellcheck disable=SC2064
  trap "docker rm -f ${boxes[*]} glm53-bench-hub >/dev/null 2>&1 || true
        for b in ${boxes[*]}; do docker volume rm \$b-docker >/dev/null 2>&1 || true; done
        docker network rm glm53-bench-net >/dev/null 2>&1 || true; rm -rf $inv" RETURN
  # The demo's settings (one file, linked) on four boxes of the demo's healthy profile.
  ln -s "$ROOT/inventories/demo/group_vars" "$inv/group_vars"
  {
    echo "gpu_hosts:"; echo "  hosts:"
    for n in "${boxes[@]}"; do echo "    $n: {sim_gpu_profile: {count: 2, memory_used_mib: 2, p2p: OK}}"; done
  } >"$inv/hosts.yml"
  export MOLECULE_PROJECT_DIRECTORY="$ROOT"
  local setup first one four restart engine
  setup=$(wall ansible-playbook -i "$inv/hosts.yml" tests/demo/boxes.yml -e sim_prefix=glm53-bench)
  first=$(wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml)
  one=$(wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml -l "${boxes[0]}")
  ! grep -Eq 'changed=[1-9]' /tmp/glm53-bench-last.log || echo "warning: the 1-host no-op run changed something" >&2
  four=$(wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml)
  ! grep -Eq 'changed=[1-9]' /tmp/glm53-bench-last.log || echo "warning: the 4-host no-op run changed something" >&2
  restart=$(wall ansible-playbook -i "$inv/hosts.yml" playbooks/site.yml --tags restart -l "${boxes[0]}")
  # The engine's own start: the stand-in's "serving ... loaded in N s" line in the restarted
  # session's rank0.log.
  engine=$(docker exec "${boxes[0]}" cat /srv/glm53/logs/current/rank0.log |
    python3 -c 'import re, sys; print(re.search(r"loaded in ([0-9.]+)s", sys.stdin.read()).group(1))')
  echo "site: boxes ${setup}s, first converge of 4 hosts ${first}s"
  echo "site: no-op converge 1 host ${one}s, 4 hosts ${four}s, ratio $(python3 -c "print('%.2f' % ($four / $one))")"
  echo "site: --tags restart (1 host) ${restart}s, engine stand-in start ${engine}s, playbook overhead $(python3 -c "print('%.1f' % ($restart - $engine))")s"
}

bench_weights() {
  python scripts/bench_weights.py
}

sections=("$@"); [ ${#sections[@]} -gt 0 ] || sections=(host-checks weights site)
for s in "${sections[@]}"; do
  echo "=== $s"
  case "$s" in
    host-checks) bench_host_checks ;;
    weights) bench_weights ;;
    site) bench_site ;;
    *) echo "unknown section $s (known: host-checks, weights, site)" >&2; exit 2 ;;
  esac
done
