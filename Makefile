# actledger — run `make help` for the targets.
SHELL := /bin/bash
GO    ?= go
BIN   := bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/actledger and bin/mocksupplier
	$(GO) build -o $(BIN)/ ./cmd/actledger ./cmd/mocksupplier

.PHONY: run
run: build ## run the whole pipeline, zero config: embedded JetStream, local Postgres, demo supplier
	@demo/run.sh

.PHONY: test
test: ## vet, then every test against the real Postgres and NATS, then short fuzz runs (CI runs this)
# Four test packages run at once (go test's default is one per core): most
# of their time is spent waiting on leases, timers, outages and commits, not
# computing, so on two cores this more than halves the wall time (5m40s -> 2m10s-2m30s).
# The cluster package runs after them, without the other packages: it
# kills JetStream nodes under load and holds the failover to time bounds,
# which a machine busy with three other packages stretched past them (a
# stream leader killed while the two cores ran the rest of the suite left
# dispatchers waiting over a minute for the new leader, in two of four
# runs).
# Every step compiles the product one way only, with -race: vet checks the
# race build the tests then reuse from the cache, and the cluster tests
# build their actledger binary with it too. A second way (plain vet, a
# plain binary) compiled everything twice: 150 s more on a fresh machine.
# Vet first, on its own: folded into the test step (go test's own vet
# pass), the race compile ran beside four packages' race tests, and a
# fresh machine's make test took longer, not shorter (docs/benchmarks.md).
# The test steps skip go test's own vet pass (-vet=off), a subset of the
# go vet that has just run over the same packages, and link without DWARF
# (-ldflags=-w: stack traces need none), a fifth of each link. The fuzz
# targets live in leaf packages, since fuzzing instruments every package
# the test binary links. Each step's output is printed whole when it ends
# (docs/benchmarks.md, "make test on a fresh machine").
	$(GO) vet -race ./...
	$(GO) test -race -vet=off -ldflags=-w -count=1 -timeout 9m -p 4 $$($(GO) list ./... | grep -v '/cluster$$')
	@$(MAKE) --no-print-directory -j4 --output-sync=target test-cluster test-fuzz-request test-fuzz-webhook test-peers

# The cluster tests wait on elections and restarts more than they compute
# (half the two cores idle when they run alone); the fuzz runs and
# bench/peers, mostly compiles of their own, run beside them at the lowest
# priority (nice 19), so that they take only what the cluster leaves.
.PHONY: test-cluster test-fuzz-request test-fuzz-webhook test-peers
test-cluster:
	$(GO) test -race -vet=off -ldflags=-w -count=1 -timeout 9m ./cluster
# Fuzz runs are bounded by a count of inputs, not by time: a time-bounded run
# can fail spuriously at its deadline on a loaded machine (golang/go#51484).
test-fuzz-request:
	nice -n 19 $(GO) test -vet=off -count=1 -run '^$$' -fuzz '^FuzzDecodeOperationRequest$$' -fuzztime 20000x ./internal/request
test-fuzz-webhook:
	nice -n 19 $(GO) test -vet=off -count=1 -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime 200000x ./webhook
# The peers harness is a module of its own (bench/peers); its tests need no
# services. It is vetted and tested with -race too, so that it reuses the
# race build of the standard library, pgx and nats.go the steps before it
# compiled, instead of compiling them a second way.
test-peers:
	cd bench/peers && nice -n 19 $(GO) vet -race ./... && nice -n 19 $(GO) test -race -vet=off -ldflags=-w -count=1 ./...

.PHONY: docs
docs: ## regenerate the documents generated from the code (docs/states.md, docs/console.md, docs/packages.md)
	$(GO) test -count=1 -run '^(TestStatesDocMatchesTransitionTable|TestRoutesDocMatchesRouteTable|TestPackagesDocListsEveryPackage)$$' ./ledger ./console ./internal/packagedoc -update

.PHONY: screenshots
screenshots: ## drive headless chromium through the console and save docs/console-*.png
	CONSOLE_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run '^TestBrowserApproveThenResolveTwo$$' ./console

.PHONY: bench
bench: ## measure the pipeline against this machine's own limits, then on ten million operations, 9-11 min (the first run fills the large ledger: 10 more) (docs/benchmarks.md)
	BENCH_DATABASE_URL="$${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}" \
	BENCH_NATS_URL="$${BENCH_NATS_URL:-nats://127.0.0.1:4222}" \
	$(GO) run ./cmd/actbench $(BENCH_FLAGS)

.PHONY: bench-peers
bench-peers: ## River and Watermill doing actledger's job beside actledger's end-to-end stage, 3 rounds, 3-4 min (docs/benchmarks.md#peers)
	cd bench/peers && \
	BENCH_DATABASE_URL="$${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}" \
	BENCH_NATS_URL="$${BENCH_NATS_URL:-nats://127.0.0.1:4222}" \
	$(GO) run . $(PEERS_FLAGS)

.PHONY: chaos
chaos: build ## soak the system as separate processes under random faults, then check the invariants (DURATION=5m SEED=...)
	$(GO) build -o $(BIN)/ ./cmd/actchaos
	$(BIN)/actchaos -duration $${DURATION:-5m} $(if $(SEED),-seed $(SEED)) $(CHAOS_FLAGS)

# golangci-lint is pinned and run through go run, so it needs no install
# and adds nothing to go.mod; its linters and why each is on are in
# .golangci.yml, which bench/peers (a module of its own) shares.
GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: lint
lint: ## golangci-lint on both modules: go vet, staticcheck, errcheck and the rest of .golangci.yml, gofmt, goimports (CI runs this)
	$(GOLANGCI_LINT) run ./...
	cd bench/peers && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...

.PHONY: clean
clean: ## remove binaries and local demo data (./data)
	rm -rf $(BIN) data
