#!/usr/bin/env bash
# The fleet-speed benchmark (not a test): every row of the speed table in one run, each side a whole
# command timed BENCH_REPEAT times (median printed), the table saved as JSON under reports/bench/.
#   usage: scripts/bench.sh [weights|peer|host-checks|deploy|noop|restart ...]   (default: every row)
#   sizes: BENCH_BOXES (no-op fleet, 32), BENCH_CHECK_BOXES (8), BENCH_DEPLOY_BOXES (8),
#          BENCH_REPEAT (3), BENCH_WEIGHTS_MIB (1024), BENCH_PEER_MIB (4096), BENCH_TIMEOUT (seconds per timed command, 1800),
#          BENCH_SETUP_TIMEOUT (the untimed set-up: boxes, first converge; 7200)
#   BENCH_KEEP=1 keeps the no-op fleet (glm53-bench-gpu*) for the next bench, which takes it again
# It makes and removes its own boxes (glm53-bench-*): run it under the shared docker lock,
#   flock /tmp/glm53-docker.lock bash scripts/bench.sh
# scripts/bench.py says what each row measures; docs/development.md has the figures.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/bootstrap.sh >/dev/null
exec .venv/bin/python scripts/bench.py "$@"
