# weft — build, run and test. Needs only Go (found on PATH or in /usr/local/go)
# and a C compiler for the race detector (installed from Debian's packages
# when missing and run as root, else the one command to run is printed);
# modules come from the Go proxy.

SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c

GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/weft

# Every package but the e2e suites (which run real processes) runs under the
# race detector; listed by go, so a new package cannot be left out.
RACE_PKGS = $(shell $(GO) list ./... | grep -v '/e2e')

.PHONY: all build dev test lint unit e2e stress cc chromium bench mr-bench fuzz clean image compose-test

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

unit: cc
	$(GO) test -race -count=1 $(RACE_PKGS)

## stress: the unit suite five times over under -race: a flaky test fails it.
stress: cc
	$(GO) test -race -count=5 -timeout 60m $(RACE_PKGS)

## cc: the race detector needs cgo and a C compiler.
cc:
	@command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1 || \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a C compiler for the race detector (Debian package gcc)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev; \
	  else \
	    echo "the race detector needs a C compiler: run 'sudo apt-get install -y gcc' (Debian/Ubuntu) and try again"; exit 1; \
	  fi

## chromium: the web UI's e2e tests drive Debian's headless Chromium.
chromium:
	@test -x /usr/bin/chromium || \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Chromium for the web UI's browser tests (Debian package chromium)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "the web UI's browser tests need Chromium: run 'sudo apt-get install -y chromium' (Debian/Ubuntu) and try again"; exit 1; \
	  fi

## e2e: black-box tests of real weft processes (the chaos suite has its own targets).
# About nine minutes on two cores; the timeout only stops a hung run.
e2e: chromium
	$(GO) test -count=1 -timeout 15m -skip '^TestChaos$$' ./e2e/...

## bench: benchmarks; raw results go to bench/latest.txt (summary: docs/benchmarks.md).
## The agent benchmarks run real clusters in-process: opportunistic allocation
## latency with a fixed count, and the Mercury-style short-task run once per mode
## (about four minutes); then submissions through a federation's routers against
## a sub-cluster directly (about half a minute).
bench:
	@mkdir -p bench
	{ $(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./scheduler/... ./fsm/... ./server/... && \
	  $(GO) test -run '^$$' -bench 'OpportunisticAllocation$$' -benchmem -benchtime 3000x ./agent/ && \
	  $(GO) test -run '^$$' -bench OpportunisticAllocationMTLS -benchmem -benchtime 1000x ./agent/ && \
	  $(GO) test -run '^$$' -bench ShortTasks -benchtime 1x -timeout 30m ./agent/ && \
	  $(GO) test -run '^$$' -bench ContainerStart -benchtime 300x ./agent/ && \
	  $(GO) test -run '^$$' -bench BenchmarkSubmit -benchtime 2000x ./router/ && \
	  $(GO) test -run '^$$' -bench BenchmarkSpanningLatency -benchtime 200x ./agent/ && \
	  $(GO) test -run '^$$' -bench BenchmarkSpanningThroughput -benchtime 3x ./agent/ && \
	  $(GO) test -run '^$$' -bench BenchmarkMapReducePlacement -benchtime 3x -timeout 30m ./e2e/ ; } | tee bench/latest.txt

## mr-bench: the MapReduce experiment alone (docs/mapreduce.md): WordCount and a skewed
## sort on three servers and six agents in two racks, reduces at their centers of gravity
## against reduces placed anywhere; results in bench/mapreduce-placement.txt.
mr-bench:
	@mkdir -p bench
	$(GO) test -run '^$$' -bench BenchmarkMapReducePlacement -benchtime 3x -timeout 30m ./e2e/ | tee bench/mapreduce-placement.txt

## fuzz: fuzz each decode path in turn, each for FUZZTIME (default 60s).
## FUZZ_TARGETS holds PACKAGE:FuzzName, one per line; a failing input is
## saved under the package's testdata/fuzz and replayed by `make unit`.
## FUZZTIME may be a count of executions (CI: 50000x). A duration can end a
## clean run with a spurious "context deadline exceeded" in Go 1.26's fuzz
## coordinator (golang/go#75804, fixed in Go 1.27); a count has no deadline.
## FUZZMINIMIZE bounds the minimisation of every input that finds new
## coverage: at Go's default (60 s each) FuzzRestore and FuzzApply spent a
## whole short run minimising one large snapshot and ran ~10 inputs.
FUZZTIME ?= 60s
FUZZMINIMIZE ?= 200x
FUZZ_TARGETS := \
	./rpc:FuzzServerCodec \
	./rpc:FuzzRequestBodies \
	./rpc:FuzzFastCodec \
	./internal/msgpackscan:FuzzScan \
	./fsm:FuzzApply \
	./fsm:FuzzRestore \
	./fsm:FuzzContainerRecord \
	./fsm:FuzzCommandRoundTrip \
	./internal/identity:FuzzParseToken \
	./internal/identity:FuzzDecodeClaims \
	./acl:FuzzParseRules \
	./internal/config:FuzzScanCountsAtLeastHCLsTokens \
	./internal/gossip:FuzzInspectPacket \
	./internal/gossip:FuzzInspectStream \
	./scheduler/federation:FuzzRank \
	./scheduler/federation:FuzzSplit \
	./router/fedstate:FuzzApply
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== $${t#*:} ($${t%%:*}) for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) "$${t%%:*}"; \
	done

clean:
	rm -rf bin

# ---- packaging: the container image and the compose cluster -----------------
IMAGE ?= weft:latest

## image: the FROM-scratch image (Dockerfile) of a static binary built here.
image:
	CGO_ENABLED=0 $(GO) build -buildvcs=auto -trimpath -ldflags "$(LDFLAGS)" -o bin/weft-static ./cmd/weft
	docker build -t $(IMAGE) -t weft:$(VERSION) .

## compose-test: build the image, bring docker-compose.yml's secure cluster
## up, run an app through it, kill the leader's container, see the app
## finish, tear down (e2e/compose_test.go; needs docker and docker-compose).
compose-test:
	$(GO) test -tags compose -count=1 -v -timeout 20m -run '^TestCompose' ./e2e/

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

# sim-bench: the load simulator's scenarios (SPEC §17, docs/scale.md), each
# against three `weft server` processes it starts, results in bench/sim-*.txt
# and charts under bench/sim/, then the generated part of docs/scale.md
# rewritten from them (cmd/simreport). SIM_DURATION shortens or lengthens
# each run (a scenario's own -duration wins); SIM_ONLY="name ..." runs only
# those scenarios (the report still covers every scenario's last results).
SIM_DURATION ?= 60s
SIM_ONLY ?=
# Mercury's scenario (seed 000, docs/scale.md): short tasks on small nodes,
# guaranteed only against half the apps opportunistic, same seed and work.
SIM_SHORT := -nodes=2000+-node-resources=memory_mb=8192,vcores=4+-task-resources=memory_mb=4096,vcores=4+-queue-length=2+-nodes-used=20+-apps-per-second=1+-tasks-min=100+-tasks-max=300+-task-duration-min=500ms+-task-duration-max=5s+-seed=7

# The opportunistic matrix (docs/scale.md, docs/opportunistic.md): pairs
# of cluster-bound runs, guaranteed only against half the apps
# opportunistic with every mechanism and with each one off, same seed and
# work, OPP_RUNS runs of each (opp-PAIR.KIND-rN). bound-200: 0.5-5 s tasks
# at about 140% of what the cluster runs; mercury-200: 0.5-3 s tasks at about
# 120% and AMs that allocate on a 1 s heartbeat (Mercury's scenario); bound-2000: the
# first at 2,000 nodes; short-2000: the same work at a fifth of the load
# (sim-bench's short-*-2000, a cluster with room to spare). Each runs its
# workload 20 s before measuring 60 s: a cluster-bound pair is measured once
# its backlog has built up, in the steady state its bound describes. `make
# sim-opp-bench` runs only these (about 50 minutes).
OPP_RUNS ?= 1 2 3
OPP_BASE := -node-resources=memory_mb=8192,vcores=4+-task-resources=memory_mb=4096,vcores=4+-queue-length=2+-nodes-used=20+-tasks-min=100+-tasks-max=300+-task-duration-min=500ms+-seed=7+-warmup=20s
OPP_ALL := -opportunistic=0.5+-pause+-overcommit=memory_mb=0.9,vcores=1.0
OPP_PAIRS := \
	bound-200:-nodes=200+-apps-per-second=0.5+-task-duration-max=5s+$(OPP_BASE) \
	mercury-200:-nodes=200+-apps-per-second=0.7+-task-duration-max=3s+-am-heartbeat=1s+$(OPP_BASE) \
	bound-2000:-nodes=2000+-apps-per-second=5+-task-duration-max=5s+$(OPP_BASE) \
	short-2000:-nodes=2000+-apps-per-second=1+-task-duration-max=5s+$(OPP_BASE)
OPP_KINDS := guaranteed:-opportunistic=0 opportunistic:$(OPP_ALL)
# Each mechanism off, on the first pair only, one run each.
OPP_OFF := \
	no-windows:$(OPP_ALL)+-shared-list \
	no-pause:-opportunistic=0.5+-overcommit=memory_mb=0.9,vcores=1.0 \
	no-overcommit:-opportunistic=0.5+-pause \
	no-turn-away:$(OPP_ALL)+-turn-away-feedback=false
opp_word = $(word $(1),$(subst :, ,$(2)))
OPP_SCENARIOS := \
	$(foreach r,$(OPP_RUNS),$(foreach p,$(OPP_PAIRS),$(foreach k,$(OPP_KINDS),opp-$(call opp_word,1,$(p)).$(call opp_word,1,$(k))-r$(r):$(call opp_word,2,$(p))+$(call opp_word,2,$(k))))) \
	$(foreach k,$(OPP_OFF),opp-$(call opp_word,1,$(firstword $(OPP_PAIRS))).$(call opp_word,1,$(k))-r1:$(call opp_word,2,$(firstword $(OPP_PAIRS)))+$(call opp_word,2,$(k)))
OPP_NAMES := $(foreach s,$(OPP_SCENARIOS),$(firstword $(subst :, ,$(s))))

SIM_SCENARIOS := \
	heartbeats-1000:-nodes=1000 \
	heartbeats-2000:-nodes=2000 \
	heartbeats-5000:-nodes=5000 \
	heartbeats-10000:-nodes=10000 \
	heartbeats-10000-gc400:-nodes=10000+-server-gc-percent=400 \
	heartbeats-10000-10m:-nodes=10000+-server-gc-percent=400+-duration=10m \
	apps-1000:-nodes=1000+-apps-per-second=2+-tasks-min=10+-tasks-max=100 \
	throughput-1000:-nodes=1000+-apps=100+-apps-per-second=100+-tasks-min=1000+-tasks-max=1000+-task-duration-min=5m+-task-duration-max=5m \
	short-guaranteed-2000:$(SIM_SHORT)+-opportunistic=0 \
	short-opportunistic-2000:$(SIM_SHORT)+-opportunistic=0.5+-pause+-overcommit=memory_mb=0.9,vcores=1.0 \
	restart-1000:-nodes=1000+-apps=30+-apps-per-second=1+-tasks-min=1000+-tasks-max=1000+-task-duration-min=10ms+-task-duration-max=50ms+-task-resources=memory_mb=1,vcores=1+-restart-at=45s \
	restart-1m:-nodes=1000+-apps=100+-apps-per-second=2+-tasks-min=10000+-tasks-max=10000+-task-duration-min=10ms+-task-duration-max=50ms+-duration=230s+-restart-at=200s \
	$(OPP_SCENARIOS)

.PHONY: sim-bench sim-opp-bench

## sim-opp-bench: only the opportunistic matrix of sim-bench (three runs of each pair, each mechanism off once; about 50 minutes), then the report.
sim-opp-bench:
	$(MAKE) --no-print-directory sim-bench SIM_ONLY="$(OPP_NAMES)"

## sim-bench: run the simulator scenarios (heartbeats at 1,000 to 10,000 nodes, one of them for ten minutes, apps and 100,000 containers asked of 1,000 nodes, short tasks on 2,000 nodes guaranteed-only and half opportunistic, whole-quorum crashes and restarts, one with 1,000,000 containers in the state), write bench/sim-*.txt and rewrite docs/scale.md's tables (about 30 minutes).
sim-bench: build
	@mkdir -p bench/sim
	@set -e; for s in $(SIM_SCENARIOS); do \
	  name=$${s%%:*}; flags=$$(echo "$${s#*:}" | tr '+' ' '); \
	  if [ -n "$(SIM_ONLY)" ] && ! echo " $(SIM_ONLY) " | grep -q " $$name "; then continue; fi; \
	  case $$name in heartbeats-*) flags="$$flags -apps-per-second 0";; esac; \
	  echo "== sim $$name: -duration $(SIM_DURATION) $$flags"; \
	  { echo "# weft sim $$name ($$(git describe --always --dirty), $$(nproc) cores, $$(date -u +%FT%TZ))"; \
	    echo "# bin/weft sim -start-servers 3 -duration $(SIM_DURATION) $$flags"; \
	    ./$(BIN) sim -start-servers 3 -duration $(SIM_DURATION) $$flags -out bench/sim/$$name || echo "FAILED: exit $$?"; } | tee bench/sim-$$name.txt; \
	done
	$(GO) run ./cmd/simreport -bench bench -doc docs/scale.md $(foreach s,$(SIM_SCENARIOS),$(firstword $(subst :, ,$(s))))
