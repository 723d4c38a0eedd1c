# gpuledger — make targets. `make run` runs the demo on the embedded ledger,
# `make test` runs every test. Benchmarks stay out of `make test`.

GO      ?= go
PKGS    ?= ./...
RUNARGS ?=
FUZZTIME ?= 10s
# How long the fuzzer may shrink each new interesting input (Go's default,
# a minute, stalls FuzzDecodeRemoteWrite for minutes at a time).
FUZZMINIMIZE ?= 5s

.PHONY: run build static test bench bench-ingest policy-eval sim-to-real lint fuzz clean

# Simulates October 2026 (the README's month) of examples/cluster.yaml through the whole loop, writes
# gpuledger-demo/chargeback-YYYY-MM.{csv,xlsx}, then serves the API on
# 127.0.0.1:8080 until interrupted. `make run RUNARGS=-serve=false` exits
# after the reports.
run: build
	./bin/gpuledger demo $(RUNARGS)

# The version `gpuledger version` prints: the tag or commit of the checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/gpuledger ./cmd/gpuledger

# The binary of the container image (Dockerfile): static (no cgo: the
# embedded ledger is pure Go), trimmed paths, the version stamped in.
static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/gpuledger-static ./cmd/gpuledger

# The integration package (chaos tests with real processes included) runs
# for several minutes: past go test's default 10-minute limit on a loaded
# machine. tools/testsummary prints each package's result and then every
# skipped test with its reason (a missing server skips outside CI).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
test:
	$(GO) test -count=1 -timeout 45m -json $(PKGS) | $(GO) run ./tools/testsummary

# Benchmarks, including the side-by-side with VictoriaMetrics (built and
# cached by tools/build-victoriametrics.sh).
bench:
	GPULEDGER_VICTORIAMETRICS=$$(bash tools/build-victoriametrics.sh) $(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

# Ingest as users run it (not in `make test`): gpuledger serve and
# VictoriaMetrics single-node as separate processes, fed the same
# remote-write bodies of a 1k/10k/50k-GPU fleet by tools/benchingest with 1
# and 4 senders, alternating, three repetitions; prints samples/s, samples
# per CPU-second, RSS per series, the ratios and the decode-only limit.
BENCH_INGEST_ARGS ?=
bench-ingest: build
	$(GO) build -o bin/benchingest ./tools/benchingest
	./bin/benchingest -gpuledger bin/gpuledger -victoriametrics $$(bash tools/build-victoriametrics.sh) $(BENCH_INGEST_ARGS)

# The admission evaluation (not in `make test`): every policy at offered
# loads 0.7-1.1, tuned on one half of the Philly VCs and reported on the
# other, seeds 1-3, Philly jobs and Gavel's mix; prints the table with the
# command behind it (docs/policy-eval/ holds the last run's).
POLICY_EVAL_ARGS ?=
policy-eval: build
	./bin/gpuledger policy-eval -workloads philly $(POLICY_EVAL_ARGS) -out gpuledger-sim/philly
	./bin/gpuledger policy-eval -workloads gavel $(POLICY_EVAL_ARGS) -out gpuledger-sim/gavel

# The simulator against a real Kueue (not in `make test`): the same trace
# window replayed on etcd + kube-apiserver + Kueue on 127.0.0.1 (built and
# cached by tools/build-k8s-stack.sh) and in the simulator, plain Kueue and
# gpuledger's weights, side by side with the simulator's error.
SIM_TO_REAL_ARGS ?= -runs 3
sim-to-real: build
	GPULEDGER_K8S_STACK=$${GPULEDGER_K8S_STACK:-$$(bash tools/build-k8s-stack.sh)} ./bin/gpuledger sim-to-real $(SIM_TO_REAL_ARGS)

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	bash tools/check-readme.sh

# Runs each fuzz target for FUZZTIME.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzParseMicros -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ledger
	$(GO) test -run='^$$' -fuzz=FuzzHistogramJSON -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ledger
	$(GO) test -run='^$$' -fuzz=FuzzGapsJSON -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ledger
	$(GO) test -run='^$$' -fuzz=FuzzSplit -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ledger
	$(GO) test -run='^$$' -fuzz=FuzzAttribution -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./attribution
	$(GO) test -run='^$$' -fuzz='FuzzParse$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./config
	$(GO) test -run='^$$' -fuzz=FuzzParseReplay -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./config
	$(GO) test -run='^$$' -fuzz=FuzzParseExposition -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzParseRemoteWrite -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzDecodeRemoteWrite -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzConvertRemoteWrite2 -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzParseExportLines -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzScanExport -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzLogSegment -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzParseBytes -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./ingest
	$(GO) test -run='^$$' -fuzz=FuzzParseServeGen -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./capacity
	$(GO) test -run='^$$' -fuzz=FuzzParseRequests -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./capacity
	$(GO) test -run='^$$' -fuzz=FuzzParseColdStarts -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./capacity
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./tools/scaleestimate
	$(GO) test -run='^$$' -fuzz=FuzzAdmit -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./admission
	$(GO) test -run='^$$' -fuzz=FuzzSummarise -fuzztime=$(FUZZTIME) -fuzzminimizetime=$(FUZZMINIMIZE) ./tools/testsummary

clean:
	rm -rf bin gpuledger-demo
