#!/usr/bin/env bash
# Install the tools a bench runs (Debian packages of the same names) when they are
# missing: `make bench-webhook` needs wrk and hey, `make bench-instructions` valgrind.
# apt-get needs root: use it directly as root, through sudo otherwise; the package lists
# are refreshed only if the first install attempt fails.
set -euo pipefail

missing=()
for tool in "$@"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "bench: ${missing[*]} missing and neither root nor sudo; install the Debian packages ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bench: ${missing[*]} missing and no apt-get; install ${missing[*]} with your package manager" >&2
  exit 1
fi
echo "bench: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y -q "${missing[@]}" >/dev/null \
  || { "${as_root[@]}" apt-get update -q >/dev/null && "${as_root[@]}" apt-get install -y -q "${missing[@]}" >/dev/null; }
