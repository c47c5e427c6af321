#!/usr/bin/env bash
# The simulator's mem tier against live runs through `--machine local`
# (docs/experiments/sim.md, "Validation → a local cluster's mem tier"):
# a cluster whose small mem tier sits in front of a slower ssd tier
# (MEM MiB at MEM_MBPS, the ssd at SSD_MBPS, thresholds FREE), a job
# writing its files one after another (checkpoint phases of one chunk,
# no computation between), run by `sluice workload --jobs` and by
# `sluice sim day --machine local` of that very cluster, which describes the
# mem tier from the cluster's own flags (capacity, caps, --tier-free,
# --tiering). Cases: fits (the job's bytes fit in the mem tier), over
# (four times the mem tier: files move down while it writes, a write at
# Cs-w waits for room), spill (the same under --tiering manual: nothing
# moves, a full mem tier sends new chunks to the ssd).
#   bash bench/sim/livetiers.sh             # RUNS=3 of each case, ~2 min
#   SMOKE=1 bash bench/sim/livetiers.sh     # one run of each, ~30 s; checked
# Raw results: $OUT (JSON Lines, one per case and run: the live I/O time
# and the simulator's); the table: python3 bench/sim/livetiers_report.py $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} MEM=${MEM:-64} MEM_MBPS=${MEM_MBPS:-120} SSD_MBPS=${SSD_MBPS:-20}
FREE=${FREE:-4M,12M,24M}
OUT=${OUT:-bench/sim/livetiers-results.jsonl}
if [ "$SMOKE" = 1 ]; then
	RUNS=1 OUT=${OUT_SMOKE:-/tmp/sluice-livetiers-smoke.jsonl}
fi
CASES=${CASES:-"fits|over|spill"}
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d /tmp/sluice-livetiers.XXXXXX)
cleanup() { $S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
chunk=$((4 << 20))
: > "$WORK/results.jsonl"
IFS='|' read -r -a cases <<< "$CASES"
for run in $(seq 1 "$RUNS"); do
	for c in "${cases[@]}"; do
		mode=auto files=$MEM # 4 MiB files: four times the mem tier
		case $c in
		fits) files=$((MEM / 8)) ;; # half the mem tier
		over) ;;
		spill) mode=manual ;;
		*) echo "unknown case $c" >&2; exit 1 ;;
		esac
		echo "{\"id\":\"w\",\"app\":\"w\",\"submit\":0,\"nodes\":1,\"on_nodes\":[0],\"compute\":0,\"pattern\":\"N-N\",\"class\":\"bw\",\"read\":0,\"write\":$((files * chunk)),\"phases\":$files,\"meta_ops\":0}" > "$WORK/jobs.jsonl"
		$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 1 --mem "${MEM}M" --ssd 2G --pfs none \
			--data-max-mbps "$MEM_MBPS" --ssd-max-mbps "$SSD_MBPS" \
			--meta-flags "--tier-free $FREE --tiering $mode" >/dev/null
		$S workload --jobs "$WORK/jobs.jsonl" --register --state "$WORK/state" "$WORK/mnt/live" > "$WORK/live.jsonl"
		rm -rf "$WORK/sim"
		$S sim day --machine local --dir "$WORK/state" --jobs "$WORK/jobs.jsonl" --policy ffm --out "$WORK/sim" >/dev/null
		$S sim day --machine local --dir "$WORK/state" --print-machine > "$WORK/machine.json"
		python3 - "$c" "$run" "$WORK/live.jsonl" "$WORK/sim/jobs-ffm.jsonl" "$WORK/machine.json" >> "$WORK/results.jsonl" <<'PY'
import json, sys
case, run, live, sim, mach = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
s = {j["id"]: j for j in map(json.loads, open(sim))}
m = json.load(open(mach))
for l in open(live):
    j = json.loads(l)
    print(json.dumps({"case": case, "run": run, "id": j["id"], "bytes": j["bytes"], "live": j["io_time"],
                      "sim": s[j["id"]]["io_time"], "error": j.get("error", ""),
                      "mem_tier": m.get("mem_tier"), "storage_bw": m["storage"].get("target_bws")}))
PY
		$S cluster down --dir "$WORK/state" --purge >/dev/null
		rm -rf "$WORK/state"
	done
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/sim/livetiers_report.py --check "$OUT"
python3 bench/sim/livetiers_report.py "$OUT"
