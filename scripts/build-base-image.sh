#!/usr/bin/env bash
# Build a local base image the tests start from: Debian made with debootstrap and imported into
# Docker, since no image can be pulled here. The tag carries a hash of this script's inputs, so it
# is built once and rebuilt only when the suite or the package list changes.
#   usage: build-base-image.sh [FLAVOR]
#     bookworm (default)  glm53-test/debian12: a simulated GPU box (the boxes' own image)
#     trixie              glm53-test/debian13: the same on Debian 13
#     image               glm53-test/image-base: what test builds inside a box start FROM (the
#                         engine stand-in's image, the Dockerfile's builder stage)
#     runtime             glm53-test/image-runtime: the Dockerfile's runtime stage in the demo and
#                         the bench (image-base without the builder's tools: it goes to every box)
set -euo pipefail
FLAVOR=${1:-bookworm}
# What a simulated GPU box needs: python3 for Ansible, its own Docker engine, the recipe's tools
# (curl, flock, tar, gzip, sha256sum), apt's Python bindings and gpg for the toolkit role, git for
# image builds; sshd for scripts/bench.py, which reaches its boxes over SSH as a real fleet is
# (started there only: the tests reach the boxes through Docker).
BOX_PACKAGES=python3,python3-requests,python3-apt,docker.io,iptables,iproute2,procps,curl,ca-certificates,gnupg,git,patch,xz-utils,util-linux,sudo,openssh-server
case "$FLAVOR" in
  bookworm) NAME=glm53-test/debian12 SUITE=bookworm PACKAGES=$BOX_PACKAGES ;;
  trixie)   NAME=glm53-test/debian13 SUITE=trixie PACKAGES=$BOX_PACKAGES ;;
  # The engine stand-in is Python; the Dockerfile's builder fetches and unpacks with curl, git and
  # xz. Kept small: every box that builds or loads an image streams it, saves it or loads it.
  image)    NAME=glm53-test/image-base SUITE=bookworm PACKAGES=python3,curl,ca-certificates,git,xz-utils ;;
  # The engine's runtime needs bash and python3 only. Made from image-base (no download): the
  # builder's tools purged, then flattened into one layer of about 120 MB against 202.
  runtime)  NAME=glm53-test/image-runtime SUITE=bookworm PACKAGES=python3
            RUNTIME_PURGE="git curl xz-utils ca-certificates openssl perl libperl5.36 perl-modules-5.36" ;;
  *) echo "unknown flavor $FLAVOR (bookworm, trixie, image or runtime)" >&2; exit 2 ;;
esac
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ "$FLAVOR" = runtime ]; then
  BASE_INPUTS=$(docker image inspect -f '{{index .Config.Labels "org.glm53.tensorfold.base-inputs"}}' \
                glm53-test/image-base:latest 2>/dev/null) || {
    echo "[base-image] the runtime flavor is made from glm53-test/image-base: build that first (image)" >&2; exit 1; }
fi
INPUTS_HASH=$( { echo "$SUITE $PACKAGES v1"; [ "$FLAVOR" != image ] || echo "no docs";
                 [ "$FLAVOR" != runtime ] || echo "from $BASE_INPUTS purge $RUNTIME_PURGE"; } | sha256sum | cut -c1-12)
TAG="$NAME:$INPUTS_HASH"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  docker tag "$TAG" "$NAME:latest"
  echo "[base-image] $TAG is up to date"
  exit 0
fi

# A root filesystem as a tar stream on stdin becomes the tagged image.
import_rootfs() {
  docker import \
    --change 'CMD ["/bin/bash"]' \
    --change 'ENV LANG=C.UTF-8' \
    --change "LABEL org.glm53.tensorfold.base-inputs=$INPUTS_HASH" \
    - "$TAG" >/dev/null
  docker tag "$TAG" "$NAME:latest"
  echo "[base-image] built $TAG"
}

if [ "$FLAVOR" = runtime ]; then
  CID=$(docker create glm53-test/image-base:latest sh -c \
        "DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --auto-remove $RUNTIME_PURGE >/dev/null &&
         rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* && python3 -c 'import json, hashlib'")
  trap 'docker rm -f "$CID" >/dev/null 2>&1' EXIT
  docker start -a "$CID"
  docker export "$CID" | import_rootfs
  exit 0
fi

ROOTFS=$(mktemp -d /var/tmp/glm53-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
echo "[base-image] debootstrap $SUITE into $ROOTFS (a minute or two)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >/tmp/glm53-debootstrap.log 2>&1 || {
  tail -20 /tmp/glm53-debootstrap.log >&2; exit 1; }
# Smaller image and no stale lists: apt is updated by whoever needs it.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
# The image flavor goes without documentation and translations too: nothing reads them in a test.
[ "$FLAVOR" != image ] || rm -rf "$ROOTFS"/usr/share/{doc,locale,man,info}/*
tar -C "$ROOTFS" -c . | import_rootfs
