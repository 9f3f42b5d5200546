#!/usr/bin/env bash
# Benchmarks: figures, not pass/fail tests. One section per piece of the collection.
#   usage: scripts/bench.sh SECTION...   (sections: weights)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_COLLECTIONS_PATH="$ROOT/.cache/collections"

bench_weights() {  # hf_snapshot vs plain `hf download` against the Hub emulator on loopback
  python scripts/bench_weights.py "$@"
}

[ $# -gt 0 ] || { echo "usage: $0 SECTION... (weights)" >&2; exit 2; }
rc=0
for section in "$@"; do
  case "$section" in
    weights) echo "=== weights"; bench_weights || rc=1 ;;
    *) echo "unknown section $section" >&2; rc=2 ;;
  esac
done
exit $rc
