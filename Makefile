# dirigent developer entry points. The e2e targets run against a real Kubernetes control
# plane built from upstream sources (hack/k8s/build.sh, versions in hack/k8s/versions.env,
# cached under ~/.cache/dirigent/k8s) unless DIRIGENT_E2E_KUBECONFIG names a cluster or a
# Docker engine lets pytest-kind start kind. Others add their targets below.

UV ?= uv
E2E_ARGS ?=
# Processes per test suite (pytest-xdist; `--dist loadgroup` keeps an `xdist_group` on one
# worker). PYTEST_WORKERS=0 runs a suite in one process, as before.
PYTEST_WORKERS ?= 2
XDIST = -n $(PYTEST_WORKERS) --dist loadgroup

.PHONY: k8s-binaries e2e cluster-up cluster-down

# Build (first time: many minutes on 2 cores) or find the pinned control-plane binaries.
k8s-binaries:
	bash hack/k8s/build.sh >/dev/null

# The e2e suite; its session fixture starts and stops its own cluster.
e2e: $(if $(DIRIGENT_E2E_KUBECONFIG),,k8s-binaries)
	$(UV) run pytest e2e -m e2e $(XDIST) $(E2E_ARGS)

# Start a local control plane that outlives this command; prints the kubeconfig path
# (use: export KUBECONFIG=$$(make -s cluster-up)).
cluster-up: k8s-binaries
	@$(UV) run python -m e2e.harness up

cluster-down:
	@$(UV) run python -m e2e.harness down

.PHONY: test lint unit dev

# Static checks: lint, format, types, layers, generated artifacts (CRDs, block reference,
# packaging files, docs/openapi.json and the route table in docs/api.md), doc paths.
lint:
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy
	$(UV) run lint-imports
	$(UV) run dirigent crds --check
	$(UV) run dirigent blocks docs --check
	$(UV) run python -m hack.ship --check
	$(UV) run dirigent openapi --check
	$(UV) run pytest -q tests/unit/test_doc_paths.py

# Unit and integration tests (real embedded PostgreSQL), and the storage backends' own tests
# (the S3 backend's against a real SeaweedFS server, built once by `make s3-weed`).
unit: s3-weed
	$(UV) run pytest tests storage/s3/tests $(XDIST)

# Everything CI runs: static checks, unit + integration, then e2e against a real apiserver.
test: lint unit e2e

.PHONY: demo-up demo-down real-node-images
REAL_NODE ?=

# A local control plane (or kind where Docker answers) with the CRDs, plus dirigent's
# operator and worker as local processes on an embedded PostgreSQL. Prints export lines:
#   eval "$(make -s demo-up)"
# REAL_NODE=1 adds a real node (containerd + kubelet) and runs dirigent on it as pods:
# `make image`, then `helm install` of the chart (operator, API, worker, docker.run allowed);
# it prints KUBECONFIG, DIRIGENT_URL and DIRIGENT_TOKEN.
demo-up: $(if $(DIRIGENT_E2E_KUBECONFIG),,k8s-binaries)
	@$(UV) run python -m e2e.harness.demo up $(if $(REAL_NODE),--real-node,)

demo-down:
	@$(UV) run python -m e2e.harness.demo down

# --- real node (e2e/harness/realnode.py): containerd + kubelet running real containers ---
# `make e2e` starts it for the tests that request the `real_node` fixture.
# Packages, the pause image and localhost/dirigent/base:bookworm (cached in ~/.cache/dirigent).
real-node-images:
	$(UV) run python -c 'from e2e.harness.realnode import prepare_real_node as p; print(*p(), sep="\n")'

# --- packaging (issue 15): image, generated chart/config files ---
.PHONY: image ship

# The container image, built with podman (base from Debian packages, cached in
# ~/.cache/dirigent/image; BASE_IMAGE=python:3.11-slim-bookworm where a registry answers).
# Prints the image reference.
image:
	@bash hack/image/build.sh

# Regenerate the chart's values/schema/reference, dashboards, alert rules, CRD and RBAC copies.
ship:
	$(UV) run python -m hack.ship

# --- S3 (issue 32): a real S3 server, SeaweedFS built from the Go module proxy ---
.PHONY: s3-weed s3-up s3-down

# Build (first time: several minutes on 2 cores) or find weed, pinned in hack/s3/versions.env
# and cached under ~/.cache/dirigent/seaweedfs/<version>.
s3-weed:
	bash hack/s3/build.sh >/dev/null

# A SeaweedFS S3 server on 127.0.0.1 with a fresh bucket, outliving this command. Prints
# export lines (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
# DIRIGENT_S3_BUCKET):  eval "$$(make -s s3-up)"
s3-up: s3-weed
	@$(UV) run python -m e2e.harness.s3 up

s3-down:
	@$(UV) run python -m e2e.harness.s3 down
