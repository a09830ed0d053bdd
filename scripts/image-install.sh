#!/bin/sh
# The image's install steps (the Dockerfile's build stage), also run by tests/test_image.py:
#   scripts/image-install.sh SRC VENV
# builds kerf's wheel from the source tree SRC and installs it, with its runtime
# dependencies only (no `test` extra), into a fresh virtualenv VENV. The virtualenv gets
# no pip or setuptools (the build stage's pip installs into it); byte code is compiled at
# install time, so a read-only root filesystem costs nothing at start.
#
# The wheel is the compiled build (setup.py, KERF_COMPILE=1: the admission path through
# mypyc, so a C compiler is needed). It is built in a build-only virtualenv holding kerf's
# runtime dependencies and its `compile` extra (mypy, and the type information mypyc
# checks the modules against); none of that reaches VENV.
set -eu
src=$1
venv=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/build"
"$work/build/bin/pip" install --quiet "$src[compile]"
KERF_COMPILE=1 "$work/build/bin/pip" wheel --quiet --no-build-isolation --no-deps \
  --wheel-dir "$work/wheels" "$src"
python3 -m venv --without-pip "$venv"
python3 -m pip --python "$venv/bin/python" install --quiet --compile "$work/wheels"/kerf-*.whl
"$venv/bin/kerf" --help >/dev/null
