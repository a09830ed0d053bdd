#!/usr/bin/env bash
# Install what a real devcluster node runs on, from Debian's packages: containerd (with its
# ctr), runc, the CNI plugins (bridge, host-local, loopback) and iptables; and what builds
# the kerf image without a daemon: buildah and mmdebstrap (devcluster/kerfimage.py); and the
# static busybox that the upstream resize specs' image is made of (devcluster/resizespecs.py). The
# kubelet itself comes from `make cluster-tools`, the node images from `make node-images`.
# Idempotent: nothing is installed when every tool is there. Needs root (apt-get).
set -euo pipefail
cni_ok() { [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ]; }
if command -v containerd >/dev/null && command -v ctr >/dev/null && command -v runc >/dev/null \
  && command -v iptables >/dev/null && command -v buildah >/dev/null \
  && command -v mmdebstrap >/dev/null && [ -x /bin/busybox ] && cni_ok; then
  echo "node tools already installed: $(containerd --version), $(runc --version | head -1), $(buildah --version)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -q --no-install-recommends containerd runc containernetworking-plugins iptables \
  buildah mmdebstrap busybox-static >/dev/null
echo "node tools: $(containerd --version), $(runc --version | head -1), $(buildah --version)"
