#!/usr/bin/env bash
# Simulator experiments (docs/experiments/sim.md) and its speed and size
# (docs/benchmarks.md): each case is run on three different days of the
# job log (three runs), raw outputs kept under OUT.
#   bash bench/sim/run.sh [OUT]     (default: bench/sim/results)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=${1:-bench/sim/results}
LOG=${SLUICE_SWF:-sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz} # a copy of ../shared/data/swf (sim/testdata/SOURCES.md)
mkdir -p "$OUT"
cp "$(bench_sluice)" "$OUT/sluice"
S="$OUT/sluice"
days="168h 336h 504h" # days 7, 14 and 21 of the log (one weekday, a week apart), each after a week of warm-up

if [ -n "${SMOKE:-}" ]; then
	rm -rf "$OUT/exp1"
	"$S" sim day --machine taihulight --swf "$LOG" --from 168h --for 24h --warmup 168h --quiet --out "$OUT/exp1/day-168h"
	python3 bench/sim/report.py "$OUT" --check
	exit
fi

# 1. DFRA against the fixed mapping on taihulight, one simulated day each
# (the week before it runs too, unmeasured: the applications' history)
for d in $days; do
	"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --quiet --out "$OUT/exp1/day-$d" > "$OUT/exp1-day-$d.txt"
done

# 1b. the same with our own interference pairs (bench/dfra/pairwise.jsonl);
# 1c. with the factors calibrated from them (asymmetric)
for d in $days; do
	"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --interference bench/dfra/pairwise.jsonl --quiet --out "$OUT/exp1b/day-$d" > /dev/null
	"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --interference bench/dfra/pairwise.jsonl \
		--interference-model factors --quiet --out "$OUT/exp1c/day-$d" > /dev/null
done

# 2. fail-slow forwarding nodes and aged storage
# 2a. the ShenTu case: one N-N job of 10,240 nodes reading 136.9 TB from
# 140 targets spread over 5x, each placement policy (deterministic: one run)
echo '{"id":"shentu","app":"shentu","submit":0,"nodes":10240,"compute":0,"pattern":"N-N","class":"bw","read":1.369e14,"write":0,"phases":1,"meta_ops":0}' > "$OUT/shentu.jsonl"
for p in rr wrandom perf; do
	"$S" sim day --machine shentu --jobs "$OUT/shentu.jsonl" --policy ffm --placement "$p" --quiet --out "$OUT/exp2/shentu-$p" > /dev/null
done
# 2b. taihulight with storage aged 5x and 8 of its 80 static forwarding
# nodes 10x slower from the start: placement rr or perf, detection off or
# on, FFM and DFRA; and the healthy machine
for d in $days; do
	for pl in rr perf; do
		"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --spread 5 --placement "$pl" --quiet --out "$OUT/exp2/day-$d/healthy-$pl" > /dev/null
		"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --spread 5 --placement "$pl" --slow-fwds 8 --quiet --out "$OUT/exp2/day-$d/slow-$pl" > /dev/null
		"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --spread 5 --placement "$pl" --slow-fwds 8 --detect --quiet --out "$OUT/exp2/day-$d/detect-$pl" > /dev/null
	done
done

# 4. forwarding nodes 60..480 under FFM and DFRA
for n in 60 120 240 480; do
	for d in $days; do
		"$S" sim day --machine taihulight --swf "$LOG" --from "$d" --for 24h --warmup 168h --fwds "$n" --quiet --out "$OUT/exp4/fwds-$n/day-$d" > /dev/null
	done
done

# speed and size: machines of 1k..40,960 nodes (taihulight's shape), the
# whole 92-day log, wall time and peak RSS
for nodes in 1024 4096 16384 40960; do
	python3 - "$nodes" > "$OUT/machine-$nodes.json" <<'PY'
import json, sys
n = int(sys.argv[1])
m = json.load(open("sim/machine/presets/taihulight.json"))
f = max(3, n * 240 // 40960)
m.update(name="taihulight-%d" % n, compute_nodes=n, fwd_nodes=f, static_fwds=max(1, f // 3), ffm_ratio=-(-n // max(1, f // 3)))
m["storage"]["groups"] = max(1, f // 3)
print(json.dumps(m))
PY
	/usr/bin/time -f "%e %M" -o "$OUT/scale-$nodes.time" "$S" sim day --machine "$OUT/machine-$nodes.json" --swf "$LOG" --for 0 --policy dfra --quiet > "$OUT/scale-$nodes.txt"
done
python3 bench/sim/report.py "$OUT" | tee "$OUT/report.md"
# the raw results kept in the repository: every file of experiment 1, the
# summaries of experiment 4, the scale runs
if [ "$OUT" = bench/sim/results ]; then
	tar czf bench/sim/raw.tar.gz -C "$OUT" --exclude=sluice --exclude='exp4/*/*/jobs-*' --exclude='exp4/*/*/timeline-*' --exclude='exp2/day-*/*/jobs-*' --exclude='exp2/*/*/timeline-*' --exclude='exp1b/*/jobs-*' --exclude='exp1b/*/timeline-*' --exclude='exp1c/*/timeline-*' --exclude='exp1c/day-168h/jobs-*' --exclude='exp1c/day-336h/jobs-*' .
fi
