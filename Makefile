# captchaflow — the two commands are `make run` (the local stack and a demo batch) and `make test` (everything CI
# runs). `make help` lists the rest.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
BIN := $(CURDIR)/.bin
# The stack runs .bin/temporal-server (with temporal-sql-tool and temporal-ui beside it); the documents' CLI
# examples run the Temporal CLI, the command-line client, from here.
export TEMPORAL_CLI ?= $(BIN)/temporal

# Extra flags for the run command, e.g. make run ARGS="-tasks 10 -exit".
ARGS ?=
UNIT_TIMEOUT ?= 15m
# Time per fuzz target: make fuzz runs each for FUZZTIME, make test for TEST_FUZZTIME executions: a duration races
# Go 1.26's fuzz coordinator at its end (golang/go#75804, fixed in 1.27: a spurious "context deadline exceeded").
FUZZTIME ?= 2m
TEST_FUZZTIME ?= 20000x
E2E_TIMEOUT ?= 40m
# Schedules of the model-based test in make fuzz (make test runs its default, 1 000).
MODEL_SCHEDULES ?= 20000

# The tooling module (tests/go.mod): the e2e tests, simulator, devstack, run, bench and the docs and deploy
# checks, so that the product's go.mod holds only what the product imports.
TOOLING := $(GO) -C tests
# The tooling module's packages but the end-to-end tests, which need the built stack and run on their own.
tooling_unit_packages = $$($(TOOLING) list ./... | grep -v -x 'github.com/captchaflow/captchaflow/tests')
# staticcheck and workflowcheck are Go tools of the tooling module; go tool -n names the built binary, which
# then checks either module.
tool = $$($(TOOLING) tool -n $(1))

.PHONY: help run test vet lint fuzz test-fuzz workflowcheck test-unit test-e2e test-e2e-cluster test-deploy tools cli bench cluster cluster-down \
	test-cluster record-histories clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

run: tools ## start the local stack, run a demo batch, keep it up for the Web UI (ARGS="-tasks 10 -exit")
	$(TOOLING) build -o $(BIN)/run ./run
	$(BIN)/run $(ARGS)

test: vet lint workflowcheck test-unit test-fuzz test-e2e test-e2e-cluster test-deploy ## everything CI runs: vet, staticcheck, workflowcheck, unit, e2e + replay (dev server and PostgreSQL cluster), deploy checks

vet: ## go vet every package of both modules
	$(GO) vet ./...
	$(TOOLING) vet ./...

lint: ## staticcheck every package of both modules (pinned as a Go tool in tests/go.mod)
	staticcheck=$(call tool,staticcheck); $$staticcheck ./... && cd tests && $$staticcheck ./...

workflowcheck: ## check the workflow code of both modules for non-determinism
	workflowcheck=$(call tool,workflowcheck); $$workflowcheck ./... && cd tests && $$workflowcheck ./...

test-unit: tools ## unit tests (every package but the e2e package ./tests, whose server-free history replay runs here too; includes the Temporal server launcher test)
	$(GO) test -count=1 -timeout $(UNIT_TIMEOUT) ./...
	$(TOOLING) test -count=1 -timeout $(UNIT_TIMEOUT) $(tooling_unit_packages)
	$(TOOLING) test -count=1 -run 'TestReplayRecordedHistories|TestRecordedHistoriesHoldNoSecrets' .

fuzz: ## run every Go fuzz target (func Fuzz… in a tracked _test.go) for FUZZTIME each; new crashers land in testdata/fuzz
	@targets=$$(git ls-files '*_test.go' | { xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' || true; } | sed 's/:func / /'); \
	if [[ -z "$$targets" ]]; then echo "fuzz: no fuzz targets"; exit 1; fi; \
	while read -r file name; do \
		dir=$$(dirname $$file); mod=.; pkg=./$$dir; \
		case $$dir in tests | tests/*) mod=tests; pkg=.$${dir#tests};; esac; \
		echo "fuzz: $$name ($$dir, $(FUZZTIME))"; \
		$(GO) -C $$mod test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done <<< "$$targets"
	$(GO) test -count=1 -run '^TestSolveCaptchaModel$$' ./workflows -model.schedules=$(MODEL_SCHEDULES)

test-fuzz: ## every fuzz target for a short bounded time (TEST_FUZZTIME each); its seed corpus also runs in test-unit
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME) MODEL_SCHEDULES=1000

test-e2e: tools cli ## end-to-end, chaos and replay tests against the real stack, and the Web UI in headless Chromium
	$(TOOLING) test -count=1 -timeout $(E2E_TIMEOUT) .

test-e2e-cluster: tools cli ## the core e2e scenarios (happy path, worker killed, server restarted) and the Nexus ones on the PostgreSQL-backed cluster
	cluster/up.sh --detach
	trap 'cluster/down.sh' EXIT; \
	E2E_TEMPORAL_ADDRESS=127.0.0.1:$${CLUSTER_FRONTEND_PORT:-7333} \
	E2E_TEMPORAL_RESTART_CMD='cluster/down.sh && cluster/up.sh --detach' \
	E2E_TEMPORAL_CREDENTIALS=cluster/client-env.sh \
	E2E_TEMPORAL_HTTP_ADDRESS=127.0.0.1:$${CLUSTER_FRONTEND_HTTP_PORT:-7343} \
	$(TOOLING) test -count=1 -timeout $(E2E_TIMEOUT) . -run 'Core|Nexus'

test-deploy: ## checks of the deployment files (deploy/check.sh)
	deploy/check.sh

tools: ## build the pinned Temporal server, SQL tool and Web UI into .bin/ (~5 min the first time, then cached)
	tools/build.sh

cli: ## build the pinned Temporal CLI (the command-line client) into .bin/ (~3 min the first time, then cached)
	tools/build.sh --cli

bench: tools ## run the benchmark (results in tests/bench/out/)
	$(TOOLING) run ./bench

cluster: ## start a local Temporal cluster on PostgreSQL (no Docker), detached
	cluster/up.sh --detach

cluster-down: ## stop the local cluster
	cluster/down.sh

test-cluster: ## smoke-test the local cluster (up, namespace, search attributes, visibility, down)
	cluster/smoke.sh

record-histories: tools ## re-record the replay test histories in tests/
	RECORD_HISTORIES=1 $(TOOLING) test -count=1 -timeout $(E2E_TIMEOUT) . -run Record

clean: ## remove the local stack's data (.data) and built binaries, except the slow-to-build Temporal ones
	rm -rf .data
	if [[ -d $(BIN) ]]; then find $(BIN) -mindepth 1 -maxdepth 1 ! -name 'temporal*' -exec rm -rf {} +; fi
