#!/usr/bin/env bash
# The whole test suite, as CI runs it: lint, sanity, unit tests, pytest, every Molecule scenario.
# Sets itself up first (scripts/bootstrap.sh). Prints each stage's result and wall time, and a
# closing "N passed, N failed" line, what each failed stage said just before it. Exit status 0
# only when every stage passed.
#   usage: scripts/test.sh [STAGE...]   (stages: lint docs sanity units promtool pytest molecule;
#                                        all, the default: every stage, pytest beside the rest;
#                                        molecule:NAME runs one scenario)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
bash scripts/bootstrap.sh || exit 1
# shellcheck disable=SC1091
source .venv/bin/activate
export ANSIBLE_COLLECTIONS_PATH="$ROOT/.cache/collections"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1 ANSIBLE_NOCOLOR=1

PASSED=0; FAILED=0; RESULTS=()
MOLECULE_STEP_LOG=$(mktemp) FAILURES=$(mktemp); trap 'rm -f "$MOLECULE_STEP_LOG" "$FAILURES"' EXIT
SUITE_START=$(date +%s)
record() {  # record NAME RC SECONDS [NOTE]
  local note=${4:+, $4}
  if [ "$2" -eq 0 ]; then PASSED=$((PASSED + 1)); RESULTS+=("PASS  $1 (${3}s$note)")
  else FAILED=$((FAILED + 1)); RESULTS+=("FAIL  $1 (${3}s$note, exit $2)"); fi
}
# A failed stage's lines that say why, repeated at the very end of the output: CI may keep only
# the output's tail, and the stage's own lines can lie thousands of lines above it. The lines
# that name a failure (pytest's FAILED lines, Ansible's fatal ones, a recap with failures), else
# the stage's last lines; 20 at most, each cut to 400 characters.
FAILURE_LINES='^(FAILED|ERROR)[ :]|fatal: \[|failed: \[|CRITICAL|Traceback|failed=[1-9]|^E +[A-Za-z]'
why_failed() {  # why_failed NAME LOG
  local why
  why=$(grep -aE "$FAILURE_LINES" "$2" | tail -n 20)
  [ -n "$why" ] || why=$(tail -n 20 "$2")
  { echo "--- $1"; cut -c1-400 <<<"$why"; } >>"$FAILURES"
}
stage() {  # stage NAME COMMAND...
  local name=$1; shift
  local t0 rc log; t0=$(date +%s); log=$(mktemp)
  echo "=== $name"
  # Printed as it comes and kept for why_failed; the command runs in this shell (its variables stay).
  "$@" > >(tee "$log") 2>&1; rc=$?
  wait $!  # tee has written the last line
  [ "$rc" -eq 0 ] || why_failed "$name" "$log"
  rm -f "$log"
  record "$name" $rc $(( $(date +%s) - t0 ))
}

# The collection as users get it: built, installed offline, tested in place by ansible-test.
# Outside this git checkout: inside it, ansible-test lists files with git and sees none there.
INSTALL_DIR="${TMPDIR:-/tmp}/glm53-tensorfold-ansible-test-$(printf %s "$ROOT" | sha256sum | cut -c1-8)"
COLLECTION_INSTALLED=""  # once per test.sh run: sanity and units test the same built copy
install_built_collection() {
  [ -n "$COLLECTION_INSTALLED" ] && return 0
  rm -rf dist "$INSTALL_DIR" && mkdir -p dist "$INSTALL_DIR" &&
    ansible-galaxy collection build --output-path dist . >/dev/null &&
    ansible-galaxy collection install --offline --no-deps --force -p "$INSTALL_DIR" dist/glm53-tensorfold-*.tar.gz >/dev/null &&
    COLLECTION_INSTALLED=1
}
ansible_test_env() {
  # ansible-test's first run fetches a pip bootstrap script; this machine can reach PyPI but not
  # that host, so a stand-in that installs pip from ensurepip is put in its cache.
  local cache=~/.ansible/test/cache
  mkdir -p "$cache"
  cp tests/tools/get_pip_standin.py "$cache/get_pip_24_2.py"
}
run_lint() { ansible-lint --profile production --offline -q; }
run_docs() { bash scripts/docs.sh --check; }  # docs/reference/ is what the argument_specs and DOCUMENTATION give
run_sanity() {
  install_built_collection && ansible_test_env &&
    (cd "$INSTALL_DIR/ansible_collections/glm53/tensorfold" &&
     ansible-test sanity --local --python "$(python -c 'import sys;print("%d.%d"%sys.version_info[:2])')" \
       --skip-test shebang 2>&1 | grep -v '^WARNING: Reviewing previous')
}
run_units() {
  install_built_collection && ansible_test_env &&
    (cd "$INSTALL_DIR/ansible_collections/glm53/tensorfold" &&
     ansible-test units --local --python "$(python -c 'import sys;print("%d.%d"%sys.version_info[:2])')")
}
run_pytest() {  # playbook runs on localhost, and each stand-in's own tests beside it
  # Two workers, one test file each at a time (module fixtures stay per file): most tests wait on
  # ansible-playbook subprocesses, so two files at once fit this 2-core machine.
  python -m pytest -q -n 2 --dist loadfile tests/integration tests/standins
}
# Prometheus' config, rules and the alerts' unit tests, with Debian's promtool (no Docker).
run_promtool() { bash tests/monitoring/promtool.sh; }
# Passes Molecule's output through, then prints how long each of its steps took (from one step's
# "Executing" line to the next), so a slow scenario shows where its time goes.
molecule_step_times() {
  local line step="" t0 now out=()
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ $line =~ (\>|➜)\ ([a-z_]+)\]?:?\ Executing$ ]]; then
      now=$EPOCHREALTIME
      [ -n "$step" ] && out+=("$step $(awk "BEGIN { printf \"%.0f\", $now - $t0 }")s")
      step=${BASH_REMATCH[2]}; t0=$now
    fi
  done
  [ -n "$step" ] && out+=("$step $(awk "BEGIN { printf \"%.0f\", $EPOCHREALTIME - $t0 }")s")
  echo "--- molecule steps: ${out[*]}"
  echo "molecule $1: ${out[*]}" >>"$MOLECULE_STEP_LOG"
}
run_molecule() {  # run_molecule NAME
  molecule test -s "$1" 2>&1 | molecule_step_times "$1"; local rc=${PIPESTATUS[0]}
  # The boxes' /var/lib/docker volumes are named glm53-molecule-SCENARIO-HOST.
  docker volume ls -q --filter "name=glm53-molecule-$1-" | xargs -r docker volume rm >/dev/null 2>&1
  return "$rc"
}
scenarios() { for f in molecule/*/molecule.yml; do [ -e "$f" ] && basename "$(dirname "$f")"; done; }
# The scenarios' usual order of length, longest first, so that the lanes end at about the same
# time (two suite runs of 2026-12-06, seconds in two lanes: 537-574, 467-533, 485-512, 264-285,
# 225-250, 192-201, 122-127, 122-128, 72-76); a scenario not named here goes last.
SCENARIOS_LONGEST_FIRST=(gateway airgapped fleet weights_fetch tensorfold_image nvidia_toolkit
                         rank_container_failures rank_container gpu_host_checks)
scenarios_longest_first() {
  local all known s; all=$(scenarios)
  for s in "${SCENARIOS_LONGEST_FIRST[@]}"; do grep -qx "$s" <<<"$all" && echo "$s"; done
  known=$(printf '%s\n' "${SCENARIOS_LONGEST_FIRST[@]}")
  for s in $all; do grep -qx "$s" <<<"$known" || echo "$s"; done
}
# What the scenarios share on the controller, made once before they run side by side: the
# stand-ins under .cache (tests/demo/controller_standins.yml) and the load tool's venv.
run_shared_standins() {  # a few lines when it works, the whole output when it fails
  local out
  out=$(MOLECULE_PROJECT_DIRECTORY=$ROOT ansible-playbook -i localhost, -c local \
    -e ansible_python_interpreter="$(command -v python3)" tests/demo/controller_standins.yml 2>&1) ||
    { printf '%s\n' "$out"; return 1; }
  grep -E '^(TASK|changed|localhost +:)' <<<"$out"
  bash scripts/load-tool-venv.sh >/dev/null
}
# Every scenario, MOLECULE_LANES (default 2) at a time: a scenario waits on its boxes' engines,
# the stand-ins and the load tool about half of its time, so two share this 2-core machine well.
# Each scenario's output is kept and printed whole when it ends; its time is its own wall time,
# beside whatever ran in the other lane.
run_molecule_lanes() {
  local lanes=${MOLECULE_LANES:-2} logs queue=() name pid rc done_pid open
  local -A name_of=() started_at=()
  if ! [[ $lanes =~ ^[1-9][0-9]*$ ]]; then
    echo "MOLECULE_LANES=$lanes: give a whole number of lanes, 1 or more (1 runs the scenarios one after another)" >&2
    record "molecule (MOLECULE_LANES)" 2 0; return
  fi
  logs=$(mktemp -d)
  stage "molecule: the scenarios' shared stand-ins" run_shared_standins
  mapfile -t queue < <(scenarios_longest_first)
  while [ ${#queue[@]} -gt 0 ] || [ ${#name_of[@]} -gt 0 ]; do
    collect_beside_if_ended
    open=$lanes  # one lane fewer while a job started beside (pytest) still runs
    beside_running && [ "$lanes" -gt 1 ] && open=$((lanes - 1))
    while [ ${#queue[@]} -gt 0 ] && [ ${#name_of[@]} -lt "$open" ]; do
      name=${queue[0]}; queue=("${queue[@]:1}")
      echo "=== molecule $name (started; its output follows when it ends)"
      run_molecule "$name" >"$logs/$name.log" 2>&1 &
      pid=$!; name_of[$pid]=$name; started_at[$pid]=$(date +%s)
    done
    done_pid=""  # the first that ended (wait -n would miss one that ended before it was called)
    while [ -z "$done_pid" ]; do
      for pid in "${!name_of[@]}"; do kill -0 "$pid" 2>/dev/null || { done_pid=$pid; break; }; done
      [ -n "$done_pid" ] && break
      [ -n "$BESIDE_PID" ] && ! beside_running && break  # the job beside ended: a lane opens
      sleep 1
    done
    [ -n "$done_pid" ] || continue
    wait "$done_pid"; rc=$?
    name=${name_of[$done_pid]}
    echo "=== molecule $name"
    cat "$logs/$name.log"
    [ "$rc" -eq 0 ] || why_failed "molecule $name" "$logs/$name.log"
    record "molecule $name" $rc $(( $(date +%s) - started_at[$done_pid] )) "$([ "$lanes" -gt 1 ] && echo "in $lanes lanes")"
    unset "name_of[$done_pid]" "started_at[$done_pid]"
  done
  rm -rf "$logs"
}

run_named() {  # run_named STAGE: one stage as named on the command line
  case "$1" in
    all) run_whole_suite ;;
    lint) stage "ansible-lint (production profile)" run_lint ;;
    docs) stage "docs/reference is current (antsibull-docs)" run_docs ;;
    sanity) stage "ansible-test sanity" run_sanity ;;
    units) stage "ansible-test units" run_units ;;
    promtool) stage "promtool (config, rules, alert tests)" run_promtool ;;
    pytest) stage "pytest tests/integration tests/standins" run_pytest ;;
    molecule) run_molecule_lanes ;;
    molecule:*) stage "molecule ${1#molecule:}" run_molecule "${1#molecule:}" ;;
    *) echo "unknown stage $1" >&2; exit 2 ;;
  esac
}
# The checks that need no box, one after another (each keeps about one core busy).
static_checks() { local w; for w in lint docs sanity units promtool; do run_named "$w"; done; }

# One job beside the others: the whole suite starts pytest (two workers that wait on playbook
# runs, Prometheus' alert delays and throttled downloads a good part of their time) in the
# background, runs the checks without boxes meanwhile, then the Molecule lanes, one lane fewer
# while pytest still runs: on this 2-core machine that keeps both cores busy throughout. The job
# records its stages in a subshell and hands them back through files; its output is printed
# whole when it ends.
BESIDE_PID="" BESIDE_DIR=""
# shellcheck disable=SC2030,SC2031
start_beside() {  # start_beside STAGE
  BESIDE_DIR=$(mktemp -d)
  echo "=== $1 (started beside the rest; its output follows when it ends)"
  ( RESULTS=(); PASSED=0; FAILED=0
    run_named "$1" >"$BESIDE_DIR/out" 2>&1
    [ ${#RESULTS[@]} -eq 0 ] || printf '%s\n' "${RESULTS[@]}" >"$BESIDE_DIR/results"
    echo "$PASSED $FAILED" >"$BESIDE_DIR/counts" ) &
  BESIDE_PID=$!
}
beside_running() { [ -n "$BESIDE_PID" ] && kill -0 "$BESIDE_PID" 2>/dev/null; }
# shellcheck disable=SC2030,SC2031
collect_beside() {  # waits for the job beside, prints its output, takes its records
  local lines=() passed failed
  [ -n "$BESIDE_PID" ] || return 0
  wait "$BESIDE_PID"
  cat "$BESIDE_DIR/out"
  [ -s "$BESIDE_DIR/results" ] && mapfile -t lines <"$BESIDE_DIR/results" && RESULTS+=("${lines[@]}")
  read -r passed failed <"$BESIDE_DIR/counts" || { passed=0; failed=1; }
  PASSED=$((PASSED + passed)); FAILED=$((FAILED + failed))
  rm -rf "$BESIDE_DIR"; BESIDE_PID="" BESIDE_DIR=""
}
collect_beside_if_ended() { [ -z "$BESIDE_PID" ] || beside_running || collect_beside; }
run_whole_suite() {
  start_beside pytest
  static_checks
  run_molecule_lanes
  collect_beside
}

# The default: everything, pytest beside the rest (run_whole_suite).
want=("$@"); [ ${#want[@]} -gt 0 ] || want=(all)
for w in "${want[@]}"; do run_named "$w"; done

echo
echo "=== summary"
printf '%s\n' "${RESULTS[@]}"
[ -s "$MOLECULE_STEP_LOG" ] && { echo "=== molecule steps (seconds)"; cat "$MOLECULE_STEP_LOG"; }
echo "suite wall time: $(( $(date +%s) - SUITE_START ))s"
[ -s "$FAILURES" ] && { echo "=== what the failed stages said (their lines naming a failure, else their last)"; cat "$FAILURES"; }
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
