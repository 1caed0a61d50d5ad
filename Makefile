# draflow — run `make help` for the list of targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(CURDIR)/.venv
UV = $(shell hack/ensure-uv.sh)
PYTEST_ARGS ?=
E2E ?= 1
NODES ?= 4
REAL_NODES ?= 1

.PHONY: help
help: ## List every target with its one-line description
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: sync
sync: ## Install uv (cached) and the Python workspace into .venv from uv.lock
	@$(UV) sync --all-packages --frozen --quiet

.PHONY: binaries
binaries: ## Build and cache kube-apiserver, etcd, nats-server, jaeger, kustomize, tilt, kubelet-checkpoint, go-dra-driver, go-api-check, go-alloc-diff, promtool (Go)
	@hack/binaries.sh ensure

.PHONY: binaries-node
binaries-node: ## Build and cache the real-node set (kubelet, scheduler, controller-manager, kubectl, containerd, CNI; Debian runc...)
	@hack/binaries.sh ensure-node

.PHONY: browser
browser: ## Install (once) Debian's chromium: the headless browser of the web view's test (Playwright drives it)
	@hack/browser-packages.sh

.PHONY: e2e
e2e: sync binaries binaries-node ## End to end on a real cluster of this machine: real kubelet + containerd (needs root)
	@DRAFLOW_E2E=1 $(UV) run --frozen pytest tests/e2e $(PYTEST_ARGS)

.PHONY: protos
protos: sync ## Regenerate the gRPC/protobuf code from protos/ into libs/draflow-protos
	@$(UV) run --frozen python hack/gen_protos.py

.PHONY: verify-protos
verify-protos: sync ## Fail if the generated code is stale or a kubelet proto differs from the pinned upstream's
	@$(UV) run --frozen python hack/gen_protos.py --check
	@$(UV) run --frozen python hack/upstream_protos.py

.PHONY: docs
docs: sync ## Regenerate docs/configuration.md from the services' settings classes
	@$(UV) run --frozen python hack/gen_settings_docs.py

.PHONY: verify-docs
verify-docs: sync ## Fail if docs/configuration.md is out of date
	@$(UV) run --frozen python hack/gen_settings_docs.py --check

.PHONY: lint
lint: sync ## ruff over the whole workspace
	@$(UV) run --frozen ruff check .

.PHONY: typecheck
typecheck: sync ## mypy over every lib and service
	@$(UV) run --frozen mypy libs/*/src services/*/src

.PHONY: test
test: sync binaries browser $(if $(filter 0,$(E2E)),,binaries-node) verify-protos verify-docs lint typecheck ## All tests: unit, integration (real apiserver, etcd, NATS, Jaeger), then e2e on a real node (E2E=0 skips it)
	@$(UV) run --frozen pytest --durations=25 $(PYTEST_ARGS)
ifneq ($(E2E),0)
	@DRAFLOW_E2E=1 $(UV) run --frozen pytest tests/e2e
endif

.PHONY: ui-screenshot
ui-screenshot: sync binaries browser ## Run the web view's browser test and write its screenshot to docs/images/ui.png
	@DRAFLOW_UI_SCREENSHOT=docs/images/ui.png $(UV) run --frozen pytest tests/integration/test_ui_browser.py $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: sync ## Unit tests only (seconds): no server, no built binary, no network; not marked integration/e2e
	@$(UV) run --frozen pytest -m "not integration and not e2e" $(PYTEST_ARGS)

.PHONY: up
up: sync binaries ## The main job: the real local environment (and the services and demo); Ctrl-C stops it
	@$(UV) run --frozen draflow-testenv up --nodes $(NODES)

.PHONY: up-node
up-node: sync binaries binaries-node ## A real cluster here (REAL_NODES=1 kubelets + containerds; root) with draflow from overlays/e2e; Ctrl-C stops it
	@$(UV) run --frozen draflow-testenv up --real-node --real-nodes $(REAL_NODES)

.PHONY: down
down: ## Stop everything `make up` started and remove its state
	@$(UV) run --frozen draflow-testenv down

.PHONY: bench
bench: sync binaries ## Benchmarks (QUICK=1 small sizes, ONLY="publish ..." some); results in docs/benchmarks.md
	@hack/binaries.sh ensure kube-scheduler kube-controller-manager
	@$(UV) run --frozen python hack/bench.py --output docs/benchmarks.md $(if $(QUICK),--quick,) $(if $(ONLY),--only $(ONLY),)

.PHONY: chaos
chaos: sync binaries ## Bounded chaos run: 20 simulated nodes, churn, every fault kind, invariants (see docs/chaos.md)
	@$(UV) run --frozen python -m draflow_testenv.chaos $(CHAOS_ARGS)

.PHONY: clean
clean: ## Remove the virtualenv and local state (not the binary cache)
	rm -rf .venv .draflow .pytest_cache .mypy_cache .ruff_cache
