#!/usr/bin/env bash
# Install Prometheus (server and promtool) from Debian's `prometheus` package: the tests of
# `kerf recommend` start a real Prometheus and backfill histories with promtool.
# Idempotent: binaries that already answer --version are left alone. Needs root (apt-get).
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null \
  && prometheus --version >/dev/null 2>&1 && promtool --version >/dev/null 2>&1; then
  echo "prometheus already installed: $(command -v prometheus)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -q --no-install-recommends prometheus >/dev/null
prometheus --version | head -1
