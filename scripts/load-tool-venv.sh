#!/bin/bash
# Build, once, the venv of the load tool the gateway tests drive (aiperf, pinned), and print its
# path. aiperf pins huggingface_hub below 2 while the project's venv uses 2.x, so it lives apart,
# under .cache/ of the checkout; it is rebuilt only when the pins below change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${GLM53_LOAD_TOOL_VENV:-$ROOT/.cache/load-tool-venv}"
PINS="aiperf==0.13.0 tokenizers==0.23.3"
if [ -x "$VENV/bin/aiperf" ] && [ "$(cat "$VENV/.pins" 2>/dev/null)" = "$PINS" ]; then
  echo "reused $VENV"
  exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q --disable-pip-version-check $PINS 2>&1 | { grep -v "^WARNING: Location" || true; }
echo "$PINS" > "$VENV/.pins"
echo "built $VENV"
