#!/usr/bin/env bash
# Simulator experiment 3 (docs/experiments/sim.md): the burst-buffer
# policies (policy/bbos: dedicated, maxbw, maxeff, lru, fifo, bbos) on the
# BBOS paper's own testbed and on cori-bb (a DataWarp-sized buffer), with
# the paper's workloads: checkpoints of S/40 once per planning period
# T = 1.9 S / Br_max, three periods, MTBF drawn up to 100 minutes (20 for
# the restart case), three mixes (seeds) per case.
#   bash bench/sim/bb.sh [OUT]      (default: bench/sim/bb-results.jsonl)
#   SMOKE=1 bash bench/sim/bb.sh    (one machine, one mix; checked)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=${1:-bench/sim/bb-results.jsonl}
TMP=$(mktemp -d /tmp/sluice-simbb.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
S=$(bench_sluice)
MACHINES=${MACHINES:-bbos-testbed cori-bb} RUNS=${RUNS:-3}
if [ -n "${SMOKE:-}" ]; then
	OUT="$TMP/smoke.jsonl"
	"$S" sim bb --machine bbos-testbed --dwpp 1.0,1.9 --runs 1 --out "$OUT" > /dev/null
	python3 bench/sim/bb_report.py "$OUT" --check
	exit
fi
: > "$OUT"
for m in $MACHINES; do
	q=(--machine "$m" --runs "$RUNS" --out "$OUT")
	# 3a. buffer utilisation: the most each policy serves per period with
	# no checkpoint late, low and high congestion
	# (drawn: docs/experiments/img/bb-MACHINE-CONGESTION-{served,hits,ckpt}.svg)
	"$S" sim bb "${q[@]}" --dwpp 1.0,1.3,1.6,1.9,2.1 --congestion low,high --plots "${PLOTS:-docs/experiments/img}" > /dev/null
	# ... and with every application admitted whatever the policy's
	# admission says (the paper's measure: over-subscribe until late)
	# (dedicated is its admission: not run this way)
	"$S" sim bb "${q[@]}" --policy maxbw,maxeff,lru,fifo,bbos --dwpp 1.0,1.3,1.6,1.9,2.1,2.3 --congestion low,high --admit-all > /dev/null
	# 3b. bypass: BBOS with and without direct checkpoints to the PFS
	"$S" sim bb "${q[@]}" --policy bbos --dwpp 1.3,1.6,1.9 --bypass=false > /dev/null
	# 3c. version-aware cold data: periods of T, T/2, T/3 at 1:1:1 and
	# 5:2:1, DWPP 1.95, with and without versions (the paper's Figure 9)
	for c in 1:1,2:1,3:1 1:5,2:2,3:1; do
		"$S" sim bb "${q[@]}" --policy bbos,lru,fifo --dwpp 1.95 --classes "$c" > /dev/null
		"$S" sim bb "${q[@]}" --policy bbos --dwpp 1.95 --classes "$c" --versions=false > /dev/null
	done
	# 3d. restart hits with frequent failures: MTBF up to 20 minutes
	"$S" sim bb "${q[@]}" --policy bbos,lru,fifo --dwpp 1.9,2.1 --mtbf-max 20m > /dev/null
done
bench_stamp "$OUT"
python3 bench/sim/bb_report.py "$OUT"
