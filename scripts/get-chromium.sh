#!/usr/bin/env bash
# Install Chromium from Debian's `chromium` package: the test of `kerf report -o html`
# (tests/app/test_report_html.py) loads the page in headless Chromium and keeps a screenshot.
# Idempotent: a chromium that already answers --version is left alone. Needs root (apt-get).
set -euo pipefail
if command -v chromium >/dev/null && chromium --version >/dev/null 2>&1; then
  echo "chromium already installed: $(command -v chromium)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -q --no-install-recommends chromium >/dev/null
chromium --version
