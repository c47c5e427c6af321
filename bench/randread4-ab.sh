#!/usr/bin/env bash
# Two builds of sluice side by side on bench/randread4.sh (four 4 KiB
# random readers at iodepth 1, the block cache at its default): RUNS runs
# of each, alternating (the order flips every run), every round's line
# labelled with its build into OUT; then per build and round the median
# (min-max) of the ratio to the passthrough, of the reads in the round's
# first three seconds, and of the mount's resident memory at its end.
#
#   A_BIN=/tmp/sluice-old B_BIN=bin/sluice RUNS=3 OUT=bench/results/randread4-ab.jsonl bash bench/randread4-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3} A_BIN=${A_BIN:?the first build} B_BIN=${B_BIN:-bin/sluice}
OUT=${OUT:-bench/results/randread4-ab.jsonl}
go build -o bin/sluice ./cmd/sluice
# shellcheck source=bench/alternate.sh
. bench/alternate.sh
side() { # side A|B run: one randread4.sh invocation, its lines labelled with the build
	local bin=${1}_BIN
	SLUICE_BIN=${!bin} bash bench/randread4.sh | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l); d["build"] = sys.argv[1]; d["run"] = int(sys.argv[2]); print(json.dumps(d))' "$1=${!bin}" "$2" >> "$OUT"
}
alternate "$RUNS" side A B
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"build"' in l]
def m(xs):
    return "%s (%s–%s)" % (statistics.median(xs), min(xs), max(xs))
print("| build | round | ratio to passthrough | reads in the first 3 s | mount RSS MiB | runs |")
print("|---|---|---|---|---|---|")
for b in sorted({r["build"] for r in rows}):
    for rnd in sorted({r["round"] for r in rows}):
        s = [r for r in rows if r["build"] == b and r["round"] == rnd]
        print("| %s | %d | %s | %s | %s | %d |" % (b, rnd, m([r["ratio"] for r in s]),
              m([sum(r["iops_per_s"][:3]) for r in s]), m([r["mount_rss_mib"] for r in s]), len(s)))
PY
