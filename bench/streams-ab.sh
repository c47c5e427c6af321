#!/usr/bin/env bash
# Two `sluice cluster up` configurations side by side on the streams benchmark
# (bench/streams.sh): RUNS invocations of each, one round each, A and B
# alternating (the order flips every run), all into one results file;
# then A against B, medians. The default compares Beacon monitoring on
# (the default) with off: its cost on every streaming row (issue 18,
# "Measurements you can trust"; docs/benchmarks.md).
#
#   bash bench/streams-ab.sh                         # monitoring on vs off, 3 runs each, 1 and 4 streams, ~20 min
#   A="" B="--zero-copy=false" RUNS=2 bash bench/streams-ab.sh
#   A_BIN=/tmp/sluice-old B_BIN=/tmp/sluice-new B="" bash bench/streams-ab.sh   # two builds, same flags
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
A=${A-}
B=${B---monitor=false}
A_BIN=${A_BIN:-} B_BIN=${B_BIN:-} # another build for either side (streams.sh's SLUICE_BIN)
OUT=${OUT:-bench/results/streams-monitor-ab.jsonl}
export STREAMS=${STREAMS:-1 4} SIZE=${SIZE:-1g}
# freed memory the guest handed to the host meanwhile (HOLD_PAGES or not):
# new files written into such pages pay the host's first touch
REPORTED=/sys/module/page_reporting/parameters/reported_kib
rep0=$(cat "$REPORTED" 2>/dev/null || echo 0)
# shellcheck source=bench/alternate.sh
. bench/alternate.sh
side() { # side A|B run: one round of streams.sh with that side's flags and build
	local bin=${1}_BIN
	ROUNDS=1 UP="${!1}" SLUICE_BIN="${!bin}" OUT="$OUT" bash bench/streams.sh >/dev/null
}
alternate "$RUNS" side A B
echo "memory reported to the host during the runs: $((($(cat "$REPORTED" 2>/dev/null || echo 0) - rep0) >> 20)) GiB"
# streams.sh labels a run with its flags, and the build if not bin/sluice
python3 bench/streams.py "$OUT" --ab "$A${A_BIN:+ bin=$A_BIN}" "$B${B_BIN:+ bin=$B_BIN}"
