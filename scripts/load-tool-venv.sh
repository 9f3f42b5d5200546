#!/usr/bin/env bash
# Build (once) the virtual environment of the load tool the bench drives: aiperf, in a venv of its
# own because it pins huggingface_hub below 2 while the controller's venv has 2.x. Built under
# .cache/ and reused; rebuilt only when the pinned version below changes. Prints the venv's path.
#   usage: scripts/load-tool-venv.sh [VENV_DIR]     (default $GLM53_LOAD_TOOL_VENV or .cache/load-tool-venv)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${1:-${GLM53_LOAD_TOOL_VENV:-$ROOT/.cache/load-tool-venv}}
# The load tool and the tokenizer library the tests use to make a small tokenizer.json.
PINS=(aiperf==0.13.0 tokenizers==0.23.3)
stamp="$VENV/.pins"
want=$(printf '%s\n' "${PINS[@]}")
if [ -x "$VENV/bin/aiperf" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$VENV"; exit 0
fi
echo "[load-tool-venv] building $VENV (${PINS[*]})" >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >&2
"$VENV/bin/python" -m pip install -q "${PINS[@]}" >&2
printf '%s\n' "${PINS[@]}" >"$stamp"
echo "$VENV"
