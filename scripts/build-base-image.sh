#!/usr/bin/env bash
# Build the local base image every test host and test build starts from: Debian (bookworm by
# default) made with debootstrap and imported into Docker, since no image can be pulled here.
# The tag carries a hash of this script's inputs, so it is built once and rebuilt only when the
# suite or the package list changes.
#   usage: build-base-image.sh [SUITE]      (SUITE: bookworm | trixie)
set -euo pipefail
SUITE=${1:-bookworm}
case "$SUITE" in
  bookworm) NAME=glm53-test/debian12 ;;
  trixie)   NAME=glm53-test/debian13 ;;
  *) echo "unknown suite $SUITE" >&2; exit 2 ;;
esac
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a simulated GPU box needs: python3 for Ansible, its own Docker engine, the recipe's tools
# (curl, flock, tar, gzip, sha256sum), apt's Python bindings and gpg for the toolkit role, git for
# image builds.
PACKAGES=python3,python3-requests,python3-apt,docker.io,iptables,iproute2,procps,curl,ca-certificates,gnupg,git,patch,xz-utils,util-linux,sudo
INPUTS_HASH=$( { echo "$SUITE $PACKAGES v1"; } | sha256sum | cut -c1-12)
TAG="$NAME:$INPUTS_HASH"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" "$NAME:latest"
  echo "[base-image] $TAG is up to date"
  exit 0
fi

ROOTFS=$(mktemp -d /var/tmp/glm53-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
echo "[base-image] debootstrap $SUITE into $ROOTFS (a minute or two)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >/tmp/glm53-debootstrap.log 2>&1 || {
  tail -20 /tmp/glm53-debootstrap.log >&2; exit 1; }
# Smaller image and no stale lists: apt is updated by whoever needs it.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
tar -C "$ROOTFS" -c . | docker import \
  --change 'CMD ["/bin/bash"]' \
  --change 'ENV LANG=C.UTF-8' \
  --change "LABEL org.glm53.tensorfold.base-inputs=$INPUTS_HASH" \
  - "$TAG" >/dev/null
docker tag "$TAG" "$NAME:latest"
echo "[base-image] built $TAG"
