PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
KUBECTL := .tools/bin/kubectl
KUBECTL_OLDEST := .tools/bin/kubectl-1.32
HELM := .tools/bin/helm
STATE_DIR ?= examples/storefront
PORT ?= 8443
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
# The cluster the cluster benchmarks run on: sim (kubesim), real (devcluster: the real control
# plane with the node agent; `make cluster-tools` builds it) or both (one after the other, the
# figures side by side); see docs/benchmarks.md.
CLUSTER ?= sim
BENCH_SUFFIX := $(if $(filter sim,$(CLUSTER)),,-$(CLUSTER))
# The larger real-cluster run: a fifth of kubesim's 25,000 workloads, as large as the node
# agent sets up in reasonable time here (docs/benchmarks.md says why).
REAL_SIZE ?= --workloads 5000 --pods 7000 --nodes 200 --policies 200 --namespaces 50
LARGE_SIZE := $(if $(filter sim,$(CLUSTER)),,$(REAL_SIZE))
# The image the manifests name (tests/test_image.py checks they agree).
IMAGE ?= kerf:$(VERSION)

.PHONY: install test test-compiled e2e soak soak-sharded lint fmt run demo demo-real explain report crds reference image image-name kerf-image bench bench-webhook bench-instructions bench-reconciler bench-shards bench-startup certs tools cluster-tools node-tools node-images conformance-resize prometheus chromium clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	@# pip says what it fetches and builds: a cold install takes a minute or more.
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[test]'
	@# The wheel holds the product only; the dev tools (kubesim, demo, benchmarks, harness,
	@# soak, devcluster) are imported from the source tree, which this puts on the venv's path.
	$(BIN)/python -c 'import pathlib, sys, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "kerf-source-tree.pth").write_text(sys.argv[1] + "\n")' '$(CURDIR)'
	touch $(STAMP)

install: $(STAMP)

# kubectl 1.35 (the project's), 1.32 (the oldest supported) and helm 4; the script installs
# all three (TOOLS_DIR=DIR puts them in DIR/bin instead).
$(KUBECTL) $(KUBECTL_OLDEST) $(HELM): scripts/get-kubectl.sh
	bash scripts/get-kubectl.sh

tools: $(KUBECTL) $(KUBECTL_OLDEST) $(HELM)

# Prometheus and promtool (Debian's package, through apt-get) for the tests of `kerf recommend`.
prometheus:
	bash scripts/get-prometheus.sh

# Chromium (Debian's package, through apt-get): the test of `kerf report -o html` loads the page in it.
chromium:
	bash scripts/get-chromium.sh

# A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and the kubelet, built
# from the Kubernetes Go modules pinned in devcluster/go; cached by a stamp, see docs/devcluster.md.
cluster-tools:
	bash scripts/build-cluster-tools.sh

# The node images (pause and kerf-load, from devcluster/nodeimages) as docker-archive tarballs
# for `ctr images import`, built without a registry, then the kerf image (kerf-image); each
# cached by a stamp, see docs/devcluster.md.
node-images: $(STAMP)
	$(BIN)/python -m devcluster.images --out .tools/images
	$(MAKE) kerf-image

# The kerf image ($(IMAGE)) from the Dockerfile without a daemon or a registry, as
# .tools/images/kerf.tar: buildah (as root, chroot isolation) over a Debian bookworm Python
# base made with mmdebstrap, both from `make node-tools`; cached by stamps (about 6 min cold).
kerf-image: $(STAMP)
	$(BIN)/python -m devcluster.kerfimage --name $(IMAGE) --out .tools/images

# What a real devcluster node runs on: containerd, runc, the CNI plugins and iptables from
# Debian (apt-get, as root), and buildah and mmdebstrap, which build the kerf image; then the
# node images; `python -m devcluster --kubelet real`.
node-tools: $(STAMP)
	bash scripts/get-node-tools.sh
	$(MAKE) node-images

# The whole suite on kubesim (the end-to-end scenarios included); the tests that need the
# real control plane are `make e2e`'s. Two pytest-xdist workers, a file to a worker (its
# module fixtures start once), the files marked `early` first, in collection order.
TEST_ENV = KUBECTL=$(CURDIR)/$(KUBECTL) KUBECTL_OLDEST=$(CURDIR)/$(KUBECTL_OLDEST) HELM=$(CURDIR)/$(HELM)
PYTEST_SUITE = -m pytest -m "not e2e" -n 2 --dist loadfile --no-loadscope-reorder
test: $(STAMP) $(KUBECTL) $(KUBECTL_OLDEST) $(HELM)
	$(TEST_ENV) $(BIN)/python $(PYTEST_SUITE)

# The same suite on the compiled build the image ships (setup.py: the admission path
# through mypyc), in a temporary copy of the tree; .ci/run runs it after `make test`.
test-compiled: $(STAMP) $(KUBECTL) $(KUBECTL_OLDEST) $(HELM)
	$(TEST_ENV) bash scripts/with-compiled-build.sh $(BIN)/python $(CURDIR)/$(BIN)/python $(PYTEST_SUITE)

# The end-to-end scenarios, the devcluster tests, the conformance suite, the compatibility
# suite (Kubex's doc examples on kerf's CRDs: docs/coming-from-kubex.md), the Helm chart and
# make demo-real on the real control plane (kube-apiserver, etcd, controller manager and
# scheduler 1.35 built by `make cluster-tools`; the upstream resize specs' binary, cached,
# for tests/devcluster/test_resizespecs.py); the scenarios on a real kubelet where one can
# run (root, make node-tools), see docs/devcluster.md.
e2e: $(STAMP) $(KUBECTL) $(HELM) cluster-tools
	bash scripts/build-e2e-resize.sh
	KUBECTL=$(CURDIR)/$(KUBECTL) HELM=$(CURDIR)/$(HELM) KERF_E2E_BACKEND=real $(BIN)/python -m pytest tests/e2e tests/devcluster tests/conformance tests/compat tests/gpu tests/integration/test_demo_real.py

# Kubernetes' own in-place resize specs (test/e2e/common/node/pod_resize.go and
# test/e2e/node/pod_resize.go) against devcluster with a real kubelet: the e2e test binary
# built from devcluster/e2e once (cached by a stamp), then run by devcluster.resizespecs,
# which prints ginkgo's summary; the specs that cannot pass here are skipped, each with its
# reason (docs/devcluster.md). KUBELET=agent runs them against the node agent.
KUBELET ?= real
conformance-resize: $(STAMP) cluster-tools
	bash scripts/build-e2e-resize.sh
	$(BIN)/python -m devcluster.resizespecs --kubelet $(KUBELET)

# The chaos soak (docs/soak.md): kubesim, the webhook and two reconciler replicas under
# leader kills and stops, API faults and pod churn for about three minutes, then its checks;
# SEED=N replays a schedule.
soak: $(STAMP) $(KUBECTL)
	KUBECTL=$(CURDIR)/$(KUBECTL) $(BIN)/python -m soak $(if $(SEED),--seed $(SEED)) $(if $(DURATION),--duration $(DURATION))

# The same chaos on three sharded reconciler replicas (SHARDS buckets), the writer killed
# and stopped being the holder of the workloads' bucket; its checks count writes per
# bucket holder. DURATION=SECONDS shortens the chaos.
SHARDS ?= 16
soak-sharded: $(STAMP) $(KUBECTL)
	KUBECTL=$(CURDIR)/$(KUBECTL) $(BIN)/python -m soak --shards $(SHARDS) $(if $(SEED),--seed $(SEED)) $(if $(DURATION),--duration $(DURATION))

# ruff, then mypy over app (strict) and the services (pyproject.toml's [tool.mypy]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

certs/tls.crt: | $(STAMP)
	$(BIN)/kerf certs --service kerf-webhook --namespace kerf-system --out certs >/dev/null

certs: $(STAMP)
	$(BIN)/kerf certs --service kerf-webhook --namespace kerf-system --out certs

explain: $(STAMP)
	$(BIN)/kerf explain -f $(STATE_DIR) -o text

report: $(STAMP)
	$(BIN)/kerf report -f $(STATE_DIR)

# kerf's main job on the embedded default: kubesim, the webhook and the reconciler in one
# process, a storefront rightsized and narrated; exits on its own, leaves nothing running.
demo: $(STAMP) $(KUBECTL)
	KUBECTL=$(CURDIR)/$(KUBECTL) $(BIN)/python -m demo

# The same story on the real control plane (built once by cluster-tools, then cached):
# devcluster, kerf installed from manifests/ with kubectl, the webhook and the reconciler
# as local processes with their ServiceAccounts' tokens; exits on its own, leaves nothing running.
demo-real: $(STAMP) $(KUBECTL) cluster-tools
	KUBECTL=$(CURDIR)/$(KUBECTL) $(BIN)/python -m demo.real

# The bundled examples: show the decisions, then serve the webhook.
run: $(STAMP) certs/tls.crt
	$(BIN)/kerf explain -f $(STATE_DIR) -o text
	$(BIN)/kerf webhook --state-dir $(STATE_DIR) --tls-cert certs/tls.crt --tls-key certs/tls.key --host 127.0.0.1 --port $(PORT)

# The CRDs from the models, into the kustomize base and the Helm chart.
crds: $(STAMP)
	$(BIN)/python -m tools.crdgen manifests/crds
	cp manifests/crds/rightsizing.kubex.ai_*.yaml charts/kerf/crds/

# docs/reference.md from the models, guardrails, annotations and metric collectors.
reference: $(STAMP)
	$(BIN)/python -m tools.refgen docs/reference.md

# docker when its engine answers, else podman; ENGINE=... picks one, PYTHON_IMAGE=... the base,
# BUILD_FLAGS=... adds build options (e.g. --isolation=chroot for podman without cgroups).
# Without either, or without Docker Hub: make kerf-image (buildah, a tarball for containerd).
image:
	@engine="$(ENGINE)"; \
	if [ -z "$$engine" ]; then \
	  if docker info >/dev/null 2>&1; then engine=docker; \
	  elif command -v podman >/dev/null 2>&1; then engine=podman; \
	  elif command -v docker >/dev/null 2>&1; then engine=docker; \
	  else echo "make image: neither docker nor podman is installed" >&2; exit 1; fi; \
	fi; \
	set -x; $$engine build $(BUILD_FLAGS) $(if $(PYTHON_IMAGE),--build-arg PYTHON_IMAGE=$(PYTHON_IMAGE)) -t $(IMAGE) .

image-name:
	@echo $(IMAGE)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.explain --out .bench/explain.json
	$(BIN)/python -m benchmarks.statedir --out .bench/statedir.json
	$(MAKE) bench-webhook
	$(MAKE) bench-instructions
	$(MAKE) bench-startup
	$(MAKE) bench-reconciler

# The webhook under load: wrk and hey are Debian packages, installed when missing.
bench-webhook: $(STAMP)
	bash scripts/bench-tools.sh wrk hey
	bash scripts/with-compiled-build.sh $(BIN)/python $(CURDIR)/$(BIN)/python -m benchmarks.webhook --out $(CURDIR)/.bench/webhook.json

# Instructions per admission answer, counted by callgrind (valgrind, a Debian package,
# installed when missing): comparable between commits on a noisy machine. Both this and
# bench-webhook run the compiled build the image ships.
bench-instructions: $(STAMP)
	bash scripts/bench-tools.sh valgrind
	bash scripts/with-compiled-build.sh $(BIN)/python $(CURDIR)/$(BIN)/python -m benchmarks.instructions --out $(CURDIR)/.bench/instructions.json

# The reconciler over $(CLUSTER): cold start, first pass, steady pass, resync (issue 8 part 8);
# then the convergence of 1,000 workloads / 2,000 pods. CLUSTER=real runs the first at
# REAL_SIZE.
bench-reconciler: $(STAMP)
	$(BIN)/python -m benchmarks.reconciler --cluster $(CLUSTER) $(LARGE_SIZE) --out .bench/reconciler$(BENCH_SUFFIX).json
	$(BIN)/python -m benchmarks.reconciler --cluster $(CLUSTER) --workloads 1000 --pods 2000 --nodes 100 --policies 100 --namespaces 20 --out .bench/reconciler-converge$(BENCH_SUFFIX).json

# The reconciler sharded over 1, 2 and 4 replicas on kubesim (issue 37): 100,000 workloads,
# 140,000 pods, 1,400 nodes and 1,000 namespaces over 64 buckets; SHARD_BENCH_WORKLOADS=N
# runs N workloads with 1.4 N pods (docs/benchmarks.md).
SHARD_BENCH_WORKLOADS ?= 100000
bench-shards: $(STAMP)
	$(BIN)/python -m benchmarks.shards --workloads $(SHARD_BENCH_WORKLOADS) \
	  --pods $$(( $(SHARD_BENCH_WORKLOADS) * 14 / 10 )) --nodes $$(( $(SHARD_BENCH_WORKLOADS) / 70 + 10 )) \
	  --namespaces 1000 --out .bench/shards.json

# Start-up from a cluster: cold start to a synced view, then (kubesim only) /mutate over it.
bench-startup: $(STAMP)
ifeq ($(CLUSTER),sim)
	bash scripts/bench-tools.sh wrk hey
	$(BIN)/python -m benchmarks.startup --out .bench/startup.json
	$(BIN)/python -m benchmarks.webhook --from-cluster --nodes 1000 --out .bench/webhook-cluster.json
else
	$(BIN)/python -m benchmarks.startup --cluster $(CLUSTER) $(LARGE_SIZE) --out .bench/startup$(BENCH_SUFFIX).json
endif

clean:
	rm -rf $(VENV) .bench build dist *.egg-info
