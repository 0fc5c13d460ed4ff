# weft — build, run and test. Needs only Go (found on PATH or in /usr/local/go)
# and a C compiler for the race detector; modules come from the Go proxy.

GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/weft

# Packages with concurrency run under the race detector.
RACE_PKGS := ./scheduler/... ./fsm/... ./rpc/... ./server/... ./agent/... ./internal/... ./cmd/...

.PHONY: all build dev test lint unit e2e bench fuzz clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/weft

## dev: one server in one process on 127.0.0.1:8030, ready for client commands.
dev: build
	./$(BIN) dev

## test: formatting, vet, unit and in-process cluster tests under -race, then e2e.
test: lint unit e2e

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 $(RACE_PKGS)

e2e:
	$(GO) test -count=1 -timeout 10m ./e2e/...

## bench: benchmarks; raw results go to bench/latest.txt (summary: docs/benchmarks.md).
## The agent benchmarks run real clusters in-process: opportunistic allocation
## latency with a fixed count, and the Mercury-style short-task run once per mode
## (about four minutes).
bench:
	@mkdir -p bench
	{ $(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./scheduler/... ./fsm/... ./server/... && \
	  $(GO) test -run '^$$' -bench OpportunisticAllocation -benchmem -benchtime 3000x ./agent/ && \
	  $(GO) test -run '^$$' -bench ShortTasks -benchtime 1x -timeout 30m ./agent/ ; } | tee bench/latest.txt

## fuzz: fuzz the RPC decode path for a while (FUZZTIME, default 60s).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzServerCodec -fuzztime $(FUZZTIME) ./rpc

clean:
	rm -rf bin

# ---- chaos: the fault-injection suite (e2e/chaos, docs/chaos.md) -------------
# Real processes in network namespaces, partitions, kills, stops and a full
# disk under load. Needs root, ip (iproute2) and iptables; fails with a
# one-line explanation without them. SEED=0 draws a seed (printed); replay a
# failed run with the seed it printed. CHAOS_FLAGS passes more, e.g.
# CHAOS_FLAGS='-chaos.faults=leader-partition,agent-stop -chaos.failfast'.
ROUNDS      ?= 100
SEED        ?= 0
CHAOS_FLAGS ?=
CHAOS_SHORT_ROUNDS ?= 6

.PHONY: chaos chaos-short

## chaos: ROUNDS rounds of faults (default 100, 20–30 s each).
chaos:
	$(GO) test -count=1 -v -run '^TestChaos$$' -timeout $$(( $(ROUNDS) * 3 + 15 ))m ./e2e/chaos \
	  -args -chaos.rounds=$(ROUNDS) -chaos.seed=$(SEED) $(CHAOS_FLAGS)

## chaos-short: the CI version: the SPEC §13 acceptance round, then seeded rounds (about 3 minutes).
chaos-short:
	$(MAKE) --no-print-directory chaos ROUNDS=$(CHAOS_SHORT_ROUNDS) CHAOS_FLAGS="-chaos.acceptance $(CHAOS_FLAGS)"
