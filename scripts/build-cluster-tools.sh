#!/usr/bin/env bash
# Build a real Kubernetes control plane and node from the Kubernetes Go modules (devcluster/go):
#   .tools/bin/kube-apiserver, kube-controller-manager, kube-scheduler, kubelet (k8s.io/kubernetes/cmd/...)
#   .tools/bin/etcd                                                     (go.etcd.io/etcd/server/v3)
# The module versions are the ones devcluster/go/go.mod pins; the Go module proxy supplies them.
# Cached: .tools/bin/.cluster-tools.stamp holds a hash of go.mod, go.sum, any .go files under
# devcluster/go and this script; while it matches and the five binaries are there, a run only
# prints their versions. Otherwise everything is rebuilt (Go's build cache makes that cheap
# after the first, cold, build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mod="$root/devcluster/go"
bin="$root/.tools/bin"
stamp="$bin/.cluster-tools.stamp"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)
# shellcheck source=scripts/go-progress.sh
source "$root/scripts/go-progress.sh"

inputs_hash() {
  (
    cd "$root"
    {
      printf '%s\n' devcluster/go/go.mod devcluster/go/go.sum scripts/build-cluster-tools.sh \
        scripts/go-progress.sh
      find devcluster/go -name '*.go' -type f | LC_ALL=C sort
    } | while read -r f; do sha256sum "$f"; done
    go version
  ) | sha256sum | cut -d' ' -f1
}

report() {
  local line="cluster-tools:" b v
  for b in "${binaries[@]}"; do
    v="$("$bin/$b" --version 2>&1)" # whole, then the first line: a pipe to head can SIGPIPE it
    v="${v%%$'\n'*}"
    line="$line $b=[$v]"
  done
  echo "$line"
}

up_to_date() {
  local b
  [ -f "$stamp" ] || return 1
  for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done
  [ "$(cat "$stamp")" = "$(inputs_hash)" ]
}

mkdir -p "$bin"
if up_to_date; then
  report
  exit 0
fi
rm -f "$stamp"

cd "$mod"
go_phase "downloading the pinned modules (go mod download; cold: a few minutes)"
go mod download
# The versions the binaries report come from the pinned modules themselves.
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"    # e.g. v1.35.4
k8s_commit="$(go mod download -json "k8s.io/kubernetes@$k8s_version" | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p')"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
etcd_commit="$(go mod download -json "go.etcd.io/etcd/server/v3@$etcd_version" | sed -n 's/.*"Hash": "\([0-9a-f]*\)".*/\1/p')"
major="${k8s_version#v}"; major="${major%%.*}"
minor="${k8s_version#v*.}"; minor="${minor%%.*}"
build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitCommit=${k8s_commit:-unknown} -X $pkg.gitTreeState=clean"
  ldflags="$ldflags -X $pkg.buildDate=$build_date"
done
ldflags="$ldflags -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_commit:-unknown}"

# One go build for all five shares the compile work; into a scratch directory first so a
# failed or interrupted build leaves no half set behind. -mod=readonly: go.sum is complete.
tmp="$bin/.cluster-tools-build"
rm -rf "$tmp"
mkdir -p "$tmp"
go_phase "compiling etcd $etcd_version and Kubernetes $k8s_version control plane and kubelet (cold: about 3000 packages, many minutes)"
CGO_ENABLED=0 go build -v -mod=readonly -trimpath -ldflags "$ldflags" -o "$tmp/" \
  go.etcd.io/etcd/server/v3 \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubelet 2>&1 | go_progress compiling
mv "$tmp/server" "$bin/etcd" # go names the etcd main package after its path, .../server/v3
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet; do mv "$tmp/$b" "$bin/$b"; done
rmdir "$tmp"

inputs_hash >"$stamp"
report
