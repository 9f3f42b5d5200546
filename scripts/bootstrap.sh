#!/usr/bin/env bash
# Prepare this machine to run the collection's demo and tests: OS packages, a running Docker
# engine, the project venv and the locally built base image. Safe to run again: each step
# checks first and does nothing when its inputs are unchanged.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
log() { printf '[bootstrap] %s\n' "$*"; }

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "[bootstrap] run as root (or with sudo): packages and the Docker engine need it" >&2
    exit 1
  fi
}

# 1. OS packages. Only what is missing is installed.
os_packages() {
  local want=()
  command -v dockerd >/dev/null 2>&1 || want+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || want+=(debootstrap)
  command -v git >/dev/null 2>&1 || want+=(git)
  command -v ip >/dev/null 2>&1 || want+=(iproute2)
  command -v curl >/dev/null 2>&1 || want+=(curl)
  command -v gpg >/dev/null 2>&1 || want+=(gnupg)  # the stand-in NVIDIA repository (tests)
  command -v ssh-keygen >/dev/null 2>&1 || want+=(openssh-client)  # scripts/bench.py reaches its boxes over SSH
  command -v haproxy >/dev/null 2>&1 || want+=(haproxy)  # the gateway's template and reload tests run the real HAProxy
  command -v shellcheck >/dev/null 2>&1 || want+=(shellcheck)  # ansible-test sanity's shellcheck test (without it: skipped, a warning)
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || want+=(python3-venv)
  if [ "${#want[@]}" -gt 0 ]; then
    need_root
    log "installing ${want[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${want[@]}" >/dev/null
  fi
  # promtool (Debian ships it in the prometheus package) for the monitoring tests; without its
  # recommends (the node exporter), and its service is not needed here.
  if ! command -v promtool >/dev/null 2>&1; then
    need_root
    log "installing prometheus (for promtool)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
}

# 2. A running Docker engine (systemd when it runs the machine, else a background dockerd).
# The daemon gets none of this shell's open files beyond the standard three: it would keep them
# open as long as it runs (a lock that a wrapper holds with flock(1), say, never released).
close_inherited_fds() {
  local fd
  for fd in "/proc/$BASHPID/fd"/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done
  return 0
}
docker_engine() {
  if docker info >/dev/null 2>&1; then return; fi
  need_root
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl start docker
  else
    log "starting dockerd in the background (log: /var/log/dockerd.log)"
    ( close_inherited_fds; exec nohup dockerd >/var/log/dockerd.log 2>&1 ) &
  fi
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && return; sleep 0.5; done
  echo "[bootstrap] the Docker engine did not come up; see /var/log/dockerd.log" >&2
  exit 1
}

# 3. The project venv, rebuilt only when the requirements change.
python_venv() {
  local stamp=.venv/.requirements.sha256 want
  want=$(cat requirements.txt requirements.lock | sha256sum | cut -c1-64)
  if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return; fi
  log "creating .venv from requirements.txt (pinned by requirements.lock)"
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt -c requirements.lock
  echo "$want" >"$stamp"
}

# 4. Make this checkout importable as glm53.tensorfold without installing it.
collection_link() {
  mkdir -p .cache/collections/ansible_collections/glm53
  ln -sfn "$ROOT" .cache/collections/ansible_collections/glm53/tensorfold
}

# 5. The base images (Docker; debootstrap mostly waits on the mirror), one after another: the
# runtime flavor is made from the image flavor.
base_images() {
  bash scripts/build-base-image.sh
  # Debian 13 boxes (molecule/nvidia_toolkit's second platform).
  bash scripts/build-base-image.sh trixie
  # What the test image builds inside a box start from (smaller than a box: it travels).
  bash scripts/build-base-image.sh image
  # The engine image's runtime stage in the demo and the bench (made from the one above).
  bash scripts/build-base-image.sh runtime
}

# 6. The tools' own venvs, made here with the rest of the setup rather than by the first test that
# needs them: antsibull-docs (the docs stage) and the load tool aiperf (the bench tests and scenarios).
docs_venv() { bash scripts/docs.sh --setup >/dev/null; }
load_tool_venv() { bash scripts/load-tool-venv.sh >/dev/null; }

# Each pip install keeps one core busy and nothing else: on a fresh machine the venvs one after
# another took 167 s on two cores, one of them idle. Side by side, each job failing on its own.
side_by_side() {  # side_by_side FUNCTION...
  local pids=() i failed=0
  for i in "$@"; do "$i" & pids+=($!); done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "[bootstrap] ${*:$((i + 1)):1} failed" >&2; failed=1; }
  done
  return "$failed"
}

os_packages
docker_engine
collection_link
side_by_side python_venv base_images docs_venv load_tool_venv
log "ready"
