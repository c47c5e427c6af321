#!/usr/bin/env bash
# Simulator: a mem tier in front of taihulight's PFS (docs/experiments/sim.md,
# "6. A mem tier in front of the PFS"). One mem data server per storage group
# (80 of them, MEMBW MB/s each) of 0, 64 GiB, 256 GiB or 1 TiB, tiering auto
# (policy/tiering moves files down by free space; a write that finds its
# server at Cs-w waits up to 15 s, then spills) or manual (nothing moves, a
# full server spills at once), on days 7, 14 and 21 of the NASA iPSC log
# after a week of warm-up, DFRA, storage as described and aged 5x. Every
# run's summary and its I/O-intensive jobs' I/O times go to OUT, one line
# per run; bench/sim/memtier_report.py makes the tables.
#   bash bench/sim/memtier.sh [OUT]   (default: bench/sim/memtier-results.jsonl; ~3 min)
#   SMOKE=1 bash bench/sim/memtier.sh (one day, aged, no tier and 64 GiB; checked)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=${1:-bench/sim/memtier-results.jsonl}
TMP=$(mktemp -d /tmp/sluice-simmem.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp "$(bench_sluice)" "$TMP/sluice"
DAYS=${DAYS:-168 336 504}
SPREADS=${SPREADS:-1 5}
SIZES=${SIZES:-0 64G 256G 1T}
MEMBW=${MEMBW:-10000}
if [ -n "${SMOKE:-}" ]; then DAYS=168 SPREADS=5 SIZES="0 64G" OUT=$TMP/smoke.jsonl; fi
: > "$OUT"
for d in $DAYS; do
	for sp in $SPREADS; do
		for mt in $SIZES; do
			modes="auto manual"
			if [ "$mt" = 0 ]; then modes=none; fi
			for mode in $modes; do
				dir=$TMP/$d-$sp-$mt-$mode
				args=(--mem-tier "$mt")
				if [ "$mode" != none ]; then args+=(--mem-tier-mbps "$MEMBW" --tiering "$mode"); fi
				"$TMP/sluice" sim day --machine taihulight --swf sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz \
					--from "${d}h" --for 24h --warmup 168h --policy dfra --spread "$sp" "${args[@]}" \
					--quiet --out "$dir" > /dev/null
				python3 - "$dir" "$d" "$sp" "$mt" "$mode" >> "$OUT" <<'PY'
import json, sys
d, day, sp, mt, mode = sys.argv[1:]
s = json.load(open(d + "/summary.json"))
jobs = {}
for line in open(d + "/jobs-dfra.jsonl"):
    j = json.loads(line)
    if not j.get("warmup") and j["bytes"] > 1 << 30 and j["io_nodes"] > 1:
        jobs[j["id"]] = [round(j["io_time"], 4), round(j.get("stalled_s", 0), 4), j.get("mem_bytes", 0)]
print(json.dumps({"day": int(day), "spread": float(sp), "mem": mt, "tiering": mode, "stats": s["dfra"],
                  "mem_stats": s.get("dfra_mem"), "intensive": jobs}))
PY
			done
		done
	done
done
bench_stamp "$OUT"
if [ -n "${SMOKE:-}" ]; then
	python3 bench/sim/memtier_report.py "$OUT" --check
else
	echo "wrote $OUT"
fi
