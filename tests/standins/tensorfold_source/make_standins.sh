#!/usr/bin/env bash
# Builds, at test time, what the image tests fetch instead of the real sources:
#   DEST/tensorfold.git     a bare git repository standing in for github.com/ashhart/TensorFold
#                           (files from tree/ plus native/tensorfold-native = the engine
#                           stand-in ../engine/tensorfold_native.py; served over HTTP with
#                           git's dumb protocol)
#   DEST/patch-series/      a git repository standing in for the recipe's published series
#                           (patches/ holds this tree's three-patch series)
#   DEST/zig-x86_64-linux-0.17.0.tar.xz   a stand-in Zig 0.17.0 tarball (../zig/zig)
#   DEST/pins.env           ENGINE_COMMIT, SERIES_COMMIT, ZIG_SHA256 for the test's variables
# Commits use fixed names and dates, so the same files always give the same commits.
#   usage: make_standins.sh DEST
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEST=$1
rm -rf "$DEST" && mkdir -p "$DEST"
export GIT_AUTHOR_NAME=standin GIT_AUTHOR_EMAIL=standin@example.invalid GIT_COMMITTER_NAME=standin \
  GIT_COMMITTER_EMAIL=standin@example.invalid GIT_AUTHOR_DATE='2026-10-01T00:00:00Z' \
  GIT_COMMITTER_DATE='2026-10-01T00:00:00Z' GIT_CONFIG_NOSYSTEM=1 HOME="$DEST"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$HERE/tree/." "$work/engine/" 2>/dev/null || { mkdir -p "$work/engine" && cp -r "$HERE/tree/." "$work/engine/"; }
# The program `zig build ... native` would make: the engine stand-in (tests/standins/engine/),
# copied in here rather than kept twice in git.
install -m 0755 "$HERE/../engine/tensorfold_native.py" "$work/engine/native/tensorfold-native"
git -C "$work/engine" init -q -b main
git -C "$work/engine" add -A
git -C "$work/engine" commit -q -m "stand-in TensorFold source"
git clone -q --bare "$work/engine" "$DEST/tensorfold.git"
git -C "$DEST/tensorfold.git" update-server-info

mkdir -p "$DEST/patch-series/patches"
cp "$HERE"/patches/*.patch "$DEST/patch-series/patches/"
git -C "$DEST/patch-series" init -q -b main
git -C "$DEST/patch-series" add -A
git -C "$DEST/patch-series" commit -q -m "stand-in patch series"

mkdir -p "$work/zig/zig-x86_64-linux-0.17.0"
cp "$HERE/../zig/zig" "$work/zig/zig-x86_64-linux-0.17.0/zig"
tar -C "$work/zig" --owner=0 --group=0 --mtime='2026-10-01 00:00Z' --sort=name -cJf \
  "$DEST/zig-x86_64-linux-0.17.0.tar.xz" zig-x86_64-linux-0.17.0

{
  echo "ENGINE_COMMIT=$(git -C "$DEST/tensorfold.git" rev-parse HEAD)"
  echo "SERIES_COMMIT=$(git -C "$DEST/patch-series" rev-parse HEAD)"
  echo "ZIG_SHA256=$(sha256sum "$DEST/zig-x86_64-linux-0.17.0.tar.xz" | cut -d' ' -f1)"
} > "$DEST/pins.env"
