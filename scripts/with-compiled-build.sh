#!/usr/bin/env bash
# Run a command on the compiled build the image ships (setup.py, KERF_COMPILE=1):
#   scripts/with-compiled-build.sh PYTHON CMD...
# PYTHON builds, so it needs the compile extra (the test extra includes it) and a C compiler
# with Python's headers (README.md's prerequisites). The script copies the source tree
# (tracked and new files, as they are now) to a temporary directory, compiles the modules
# setup.py's COMPILED names there with mypyc, in place, and runs CMD in that copy with it
# first on PYTHONPATH, so subprocesses import the compiled modules too. The copy is removed
# afterwards: compiled modules never sit beside the sources one edits, where a stale one
# would shadow an edited .py.
set -euo pipefail
python=$1
shift
# Absolute, but not through its symlink: a virtualenv's python is one.
[[ $python == */* ]] && python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"
cd "$(dirname "$0")/.."
tree=$(mktemp -d /tmp/kerf-compiled.XXXXXX)
trap 'rm -rf "$tree"' EXIT
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' path; do [ -e "$path" ] && printf '%s\0' "$path"; done \
  | xargs -0 cp --parents -t "$tree"
(cd "$tree" && KERF_COMPILE=1 "$python" setup.py --quiet build_ext --inplace >/dev/null)
# A run that silently fell back to the pure modules would measure or test the wrong build.
(cd "$tree" && "$python" -c '
import importlib, sys
from setup import compiled_modules
pure = [m for m in compiled_modules() if not importlib.import_module(m).__file__.endswith(".so")]
sys.exit(f"not compiled: {pure}" if pure else 0)')
echo "compiled build: $tree" >&2
cd "$tree"
PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" "$@"
