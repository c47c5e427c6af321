# sluice build and test entry points. `make test` is the test command CI runs.
GO ?= go
PKGS_RACE := $(shell $(GO) list ./... | grep -v /test/e2e | grep -v -E "/sim(/bb|/tiers)?$$")

.PHONY: build test lint unit sim-validate e2e e2e-race posix posix-local xfstests xfstests-quick dfra dfra-smoke tiers tiers-smoke bbos bbos-smoke placement placement-smoke nodelocal nodelocal-smoke sim sim-smoke sim-live-smoke fuzz-smoke bench bench-smoke streams streams-smoke pipeline demo clean

build:
	$(GO) build -o bin/sluice ./cmd/sluice

# Everything CI checks: formatting, vet, staticcheck, unit tests with the
# race detector, short fuzzing of the wire and log decoders (budgets are
# execution counts: a -fuzztime duration can fail at its deadline with no
# crasher, golang/go#75804, unfixed in Go 1.26), and the
# end-to-end tests on a real FUSE mount with real daemons and fio (one of
# them on a cluster of emulated hosts), pjdfstest on a fresh cluster
# of emulated hosts, and xfstests' quick tests that apply
# (xfstests-quick). The targets run in this order, the first failure
# stops the run, and the end says how long each took (test/timed.sh).
# A+B runs targets beside each other; ~B runs B at nice 19, so it takes
# only the CPU the others leave idle. The end-to-end tests mostly wait on
# daemons, timeouts and failovers (the two cores are about a third busy
# under them), so the targets that time nothing (the fuzzers, the
# simulator's runs, pjdfstest, xfstests) go at nice 19 beside them (in one run they
# ended 500 s before the end-to-end tests did); lint and the unit tests,
# both compiling most of the time, gain nothing beside each other (328 s
# together against 267 one after the other); the smoke runs on emulated
# devices, whose caps, not the cores, set their pace, go beside each
# other; the benchmarks that compare against the passthrough go alone.
TEST_TARGETS := lint unit e2e+~fuzz-smoke+~sim-smoke+~sim-validate+~posix+~xfstests-quick e2e-race bench-smoke streams-smoke smallfiles-smoke dfra-smoke+tiers-smoke+bbos-smoke+placement-smoke+nodelocal-smoke+sim-live-smoke
test:
	@bash test/timed.sh $(TEST_TARGETS)

lint:
	@fmt=$$(gofmt -l .); if [ -n "$$fmt" ]; then echo "gofmt needed: $$fmt"; exit 1; fi
	$(GO) vet ./...
	@if command -v staticcheck >/dev/null; then staticcheck ./...; \
	elif [ -x "$$($(GO) env GOPATH)/bin/staticcheck" ]; then "$$($(GO) env GOPATH)/bin/staticcheck" ./...; \
	else echo "staticcheck not installed (.ci/run installs it)"; exit 1; fi
	@command -v shellcheck >/dev/null || { echo "shellcheck not installed (.ci/run installs it)"; exit 1; }
	shellcheck -x -S warning .ci/run $$(git ls-files '*.sh')

# The simulators (./sim, ./sim/bb, ./sim/tiers) start no goroutine
# (TestSingleThreaded checks the day simulator), so they run without the
# race detector, which made their validation replays take 8½ of go test's
# 10 minutes; the burst buffer's replays (sim-validate, ~2 min on one
# core) go beside the end-to-end tests at nice 19 in make test.
unit:
	SLUICE_REQUIRE_ETCD=1 $(GO) test -race -count=1 -timeout 20m $(PKGS_RACE)
	$(GO) test -count=1 -timeout 20m ./sim ./sim/tiers

sim-validate:
	$(GO) test -count=1 -timeout 40m ./sim/bb

fuzz-smoke:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 500000x ./internal/wire
	$(GO) test -run '^$$' -fuzz '^FuzzHeader$$' -fuzztime 500000x ./internal/wire
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 300000x ./internal/wire/chunk
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 100000x ./internal/wire/ns
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 200000x ./beacon/beaconrpc
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 200000x ./fwdmap
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 100000x ./api
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAdmin$$' -fuzztime 200000x ./api
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeBatch$$' -fuzztime 60000x ./meta/engine
	$(GO) test -run '^$$' -fuzz '^FuzzParseEtcd$$' -fuzztime 20000x ./meta/engine
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecords$$' -fuzztime 50000x ./beacon
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 100000x ./internal/size
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 100000x ./burstbuf
	$(GO) test -run '^$$' -fuzz '^FuzzParseRule$$' -fuzztime 100000x ./policy/qos
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 100000x ./sim/swf

# The end-to-end tests of the streaming client and the concurrent paths run
# once, with the race detector in every daemon (e2e-race); the plain run
# skips them. The model tests (every fsx variant, the owned files' model,
# whose feed bound is tighter without the race detector) run in both.
E2E_RACE := TestStreaming|TestFioVerify|TestJobIdentity|TestBeaconFailSlow|TestMetaCacheCoherent|TestWritebackCreates|TestWritebackUnlinks|TestWritebackDirectories|TestWritebackTreeModel|TestOwnedFiles|TestWritebackCloses
E2E_BOTH := TestOwnedModel|TestFsxModel

e2e:
	SLUICE_REQUIRE_SLURM=1 SLUICE_REQUIRE_ETCD=1 SLUICE_REQUIRE_APPS=1 $(GO) test -count=1 -timeout 30m -skip '^($(E2E_RACE))$$' ./test/e2e

# pjdfstest (all of it; test/pjdfstest/exclude lists what cannot pass on
# FUSE, with the reason) as root on a fresh `sluice cluster up` mount: in
# make test on a compute host's mount of a cluster of emulated hosts with
# the metadata on etcd and two standbys (the deployment that survives
# losing a host; docs/deploy.md), and on the one-host default with
# posix-local (the same suite, 8,770 checks either way; make test runs one,
# for its time budget).
posix:
	UP="--hosts --engine etcd --meta-standbys 2" bash test/pjdfstest/run.sh

posix-local:
	bash test/pjdfstest/run.sh

# xfstests' generic quick group on two local clusters mounted through
# mount(8) (test/xfstests/run.sh; about 20 minutes), and the part of it
# make test runs (test/xfstests/quick.list: 120 tests that pass here in
# at most 5 s each, and a few regression tests; the suite builds in 35 s).
xfstests:
	bash test/xfstests/run.sh

xfstests-quick:
	bash test/xfstests/run.sh $$(grep -v '^#' test/xfstests/quick.list)

# The streaming client and the concurrent paths with the race detector in
# every daemon (the fsx model in its mem variant, with the regression seeds
# found under -race).
e2e-race:
	SLUICE_E2E_RACE=1 SLUICE_FSX=mem $(GO) test -count=1 -timeout 20m -run '^($(E2E_RACE)|$(E2E_BOTH))$$' ./test/e2e

# The data-path comparison (docs/benchmarks.md); the smoke run uses small
# sizes so the harness never rots.
bench:
	bash bench/run.sh

bench-smoke:
	SMOKE=1 OUT=/tmp/sluice-bench-smoke.jsonl bash bench/run.sh
	python3 bench/report.py check /tmp/sluice-bench-smoke.jsonl
	SMOKE=1 bash bench/pipeline.sh

# Streams and CPU per byte against the passthrough (docs/benchmarks.md);
# the smoke run checks the figures are there and sane.
streams:
	bash bench/streams.sh

streams-smoke:
	ROUNDS=1 STREAMS="1 2" SIZE=64m OUT=/tmp/sluice-streams-smoke.jsonl bash bench/streams.sh >/dev/null
	python3 bench/streams.py --check /tmp/sluice-streams-smoke.jsonl

# Small files and directories against the passthrough, with the requests
# each operation costs at every hop (docs/benchmarks.md).
smallfiles:
	bash bench/smallfiles/run.sh

smallfiles-smoke:
	N=300 ROUNDS=1 COUNTN=100 OUT=/tmp/sluice-smallfiles-smoke bash bench/smallfiles/run.sh
	python3 bench/smallfiles/report.py --check /tmp/sluice-smallfiles-smoke

# The staged pipeline under load and the forwarding daemon's memory.
pipeline:
	bash bench/pipeline.sh

# DFRA's experiments (docs/experiments/dfra.md): the pairwise interference
# study, the scale-up curve and jobs outnumbering forwarding nodes; the
# smoke runs use fewer behaviours, nodes and small sizes.
dfra:
	bash bench/dfra/pairwise.sh
	bash bench/dfra/scaleup.sh
	bash bench/dfra/scarce.sh

dfra-smoke:
	mkdir -p /tmp/sluice-dfra-smoke
	SMOKE=1 OUT=/tmp/sluice-dfra-smoke/pairwise.jsonl bash bench/dfra/pairwise.sh
	python3 bench/dfra/report.py --check /tmp/sluice-dfra-smoke/pairwise.jsonl
	SMOKE=1 OUT=/tmp/sluice-scaleup-smoke.jsonl bash bench/dfra/scaleup.sh
	SMOKE=1 OUT=/tmp/sluice-dfra-smoke/scarce.jsonl bash bench/dfra/scarce.sh
	# the simulator replays the runs just made (sim/validate_dfra_test.go)
	SLUICE_DFRA_RESULTS=/tmp/sluice-dfra-smoke/ SLUICE_DFRA_SMOKE=1 $(GO) test -count=1 -run TestValidateDFRA -v ./sim

# Tiering experiments (docs/experiments/tiers.md).
tiers:
	bash bench/tiers/threshold.sh
	bash bench/tiers/prefetch.sh
	bash bench/tiers/checkpoint.sh
	bash bench/tiers/replicas.sh

tiers-smoke:
	SMOKE=1 OUT=/tmp/sluice-tiers-smoke.jsonl bash bench/tiers/threshold.sh
	SMOKE=1 OUT=/tmp/sluice-prefetch-smoke.jsonl bash bench/tiers/prefetch.sh
	SMOKE=1 OUT=/tmp/sluice-checkpoint-smoke.jsonl bash bench/tiers/checkpoint.sh
	SMOKE=1 OUT=/tmp/sluice-replicas-smoke.jsonl bash bench/tiers/replicas.sh

# The BBOS burst-buffer experiment (docs/experiments/bbos.md): the six
# policies on the same checkpointing workloads; the smoke run checks its
# figures are there and sane.
bbos:
	bash bench/bbos/run.sh

bbos-smoke:
	SMOKE=1 OUT=/tmp/sluice-bbos-smoke.jsonl.gz bash bench/bbos/run.sh
	python3 bench/bbos/report.py --check /tmp/sluice-bbos-smoke.jsonl.gz

# The performance-aware placement experiment (docs/experiments/placement.md):
# 8 capped data servers, N-N jobs of 8..128 ranks, perf, rr and wrandom.
placement:
	bash bench/placement/run.sh

# CI: N = 8, perf and rr, figures checked (report.py --check).
placement-smoke:
	SMOKE=1 bash bench/placement/run.sh

nodelocal:
	bash bench/nodelocal/run.sh

# CI: one run, small, figures checked (report.py --check).
nodelocal-smoke:
	SMOKE=1 bash bench/nodelocal/run.sh

# The simulator's experiments and speed (docs/experiments/sim.md).
sim:
	bash bench/sim/run.sh
	bash bench/sim/bb.sh
	bash bench/sim/qos.sh
	FWDS=24 bash bench/sim/qos.sh bench/sim/qos-results-24.jsonl
	bash bench/sim/failslow.sh
	bash bench/sim/maintenance.sh
	bash bench/sim/memtier.sh
	bash bench/sim/liveqos.sh
	bash bench/sim/livetiers.sh
	bash bench/sim/liveslow.sh
	bash bench/sim/liveday.sh

# CI: the command line end to end on one simulated day of taihulight
# after a week of warm-up; DFRA must speed some job up and slow few; the
# burst-buffer, QoS and fail-slow scenarios small; one QoS run, one
# fail-slow run, a writer through a local mem tier in front of an ssd tier
# and 20 minutes of the job log live, each replayed on the
# running cluster's description.
# The simulator alone (sim-smoke), and against live clusters
# (sim-live-smoke: measured runs the simulator replays).
sim-smoke:
	SMOKE=1 bash bench/sim/run.sh /tmp/sluice-sim-smoke
	SMOKE=1 bash bench/sim/bb.sh
	SMOKE=1 bash bench/sim/qos.sh
	SMOKE=1 bash bench/sim/failslow.sh
	SMOKE=1 bash bench/sim/maintenance.sh
	SMOKE=1 bash bench/sim/memtier.sh

sim-live-smoke:
	SMOKE=1 bash bench/sim/liveqos.sh
	SMOKE=1 bash bench/sim/liveslow.sh
	SMOKE=1 bash bench/sim/livetiers.sh
	SMOKE=1 bash bench/sim/liveday.sh

# The main job: a local cluster and a sample workload of several jobs.
demo: build
	bash examples/demo.sh

clean:
	rm -rf bin
