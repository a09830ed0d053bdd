#!/bin/sh
# The image's install steps (the Dockerfile's build stage), also run by tests/test_image.py:
#   scripts/image-install.sh SRC VENV
# builds kerf's wheel from the source tree SRC and installs it, with its runtime
# dependencies only (no `test` extra), into a fresh virtualenv VENV. The virtualenv gets
# no pip or setuptools (the build stage's pip installs into it); byte code is compiled at
# install time, so a read-only root filesystem costs nothing at start.
set -eu
src=$1
venv=$2
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
python3 -m pip wheel --quiet --no-deps --wheel-dir "$wheels" "$src"
python3 -m venv --without-pip "$venv"
python3 -m pip --python "$venv/bin/python" install --quiet --compile "$wheels"/kerf-*.whl
"$venv/bin/kerf" --help >/dev/null
