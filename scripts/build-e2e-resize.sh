#!/usr/bin/env bash
# Build Kubernetes' end-to-end test binary, cut down to the in-place resize specs, from the Go
# module devcluster/e2e (k8s.io/kubernetes v1.35.4 at devcluster/go's pins):
#   .tools/bin/e2e-resize.test
# Cached like scripts/build-cluster-tools.sh: .tools/bin/.e2e-resize.stamp holds a hash of
# go.mod, go.sum, the .go files under devcluster/e2e, this script and `go version`; while it
# matches and the binary is there, a run only prints its version. See docs/devcluster.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mod="$root/devcluster/e2e"
# shellcheck source=scripts/go-progress.sh
source "$root/scripts/go-progress.sh"
bin="$root/.tools/bin"
out="$bin/e2e-resize.test"
stamp="$bin/.e2e-resize.stamp"

inputs_hash() {
  (
    cd "$root"
    {
      printf '%s\n' devcluster/e2e/go.mod devcluster/e2e/go.sum scripts/build-e2e-resize.sh
      find devcluster/e2e -name '*.go' -type f | LC_ALL=C sort
    } | while read -r f; do sha256sum "$f"; done
    go version
  ) | sha256sum | cut -d' ' -f1
}

report() {
  local v
  v="$("$out" --version 2>&1)"
  echo "e2e-resize: $out [${v%%$'\n'*}]"
}

mkdir -p "$bin"
if [ -f "$stamp" ] && [ -x "$out" ] && [ "$(cat "$stamp")" = "$(inputs_hash)" ]; then
  report
  exit 0
fi
rm -f "$stamp"

cd "$mod"
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
k8s_commit="$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p')"
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitCommit=${k8s_commit:-unknown} -X $pkg.gitTreeState=clean"
done

# `go test -c` names nothing it compiles: the test's dependencies are compiled first with
# `go build -v` (same flags, so the test build finds them cached), which counts them.
go_phase "compiling the e2e framework and the resize specs of Kubernetes $k8s_version (cold: about 1600 packages, many minutes)"
CGO_ENABLED=0 go list -deps -test -f '{{if not .Standard}}{{if not .ForTest}}{{.ImportPath}}{{end}}{{end}}' . |
  grep -v '^kerf\.dev/devcluster/e2e' |
  CGO_ENABLED=0 xargs go build -v -mod=readonly -trimpath 2>&1 | go_progress compiling
go_phase "building the e2e resize test binary"
CGO_ENABLED=0 go test -c -vet=off -mod=readonly -trimpath -ldflags "$ldflags" -o "$out.tmp" .
mv "$out.tmp" "$out"
inputs_hash >"$stamp"
report
