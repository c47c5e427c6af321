#!/usr/bin/env bash
# Simulator: QoS caps (policy/qos rules as flow caps, docs/sim.md) on a
# day of taihulight. The heaviest writing application of the NASA iPSC log
# as the workload maps it (app4: 60 N-N bandwidth jobs, 11 TB) is capped
# per forwarding node and storage target at RATES, against no rule, on
# three days of the log (a week of warm-up before each): what the cap
# costs its jobs and what it gives the others.
#   bash bench/sim/qos.sh [OUT]          (default: bench/sim/qos-results.jsonl; ~1 min)
#   FWDS=24 bash bench/sim/qos.sh bench/sim/qos-results-24.jsonl   (forwarding nodes scarce)
#   SMOKE=1 bash bench/sim/qos.sh        (one day, one rate; checked)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=${1:-bench/sim/qos-results.jsonl}
TMP=$(mktemp -d /tmp/sluice-simqos.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp "$(bench_sluice)" "$TMP/sluice"
APP=${APP:-app4}
RATES=${RATES:-none 1G 300M 100M} # none first: the others compare with it
DAYS=${DAYS:-168 192 216}
FWDS=${FWDS:-0} # forwarding nodes (0: the machine's 240; 24: scarce)
if [ -n "${SMOKE:-}" ]; then RATES="none 100M" DAYS=168 OUT=$TMP/smoke.jsonl; fi
: > "$OUT"
for d in $DAYS; do
	for r in $RATES; do
		q=()
		[ "$r" != none ] && q=(--qos "cap app=$APP op=write rate=$r")
		"$TMP/sluice" sim day --machine taihulight --swf sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz \
			--from "${d}h" --for 24h --warmup 168h --policy ffm --fwds "$FWDS" --quiet --out "$TMP/$d-$r" "${q[@]}" > /dev/null
		python3 bench/sim/qos_report.py summarise "$TMP/$d-$r/jobs-ffm.jsonl" "$APP" "$d" "$r" "$TMP/$d-none/jobs-ffm.jsonl" >> "$OUT"
	done
done
bench_stamp "$OUT"
python3 bench/sim/qos_report.py table "$OUT" ${SMOKE:+--check}
