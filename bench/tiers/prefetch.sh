#!/usr/bin/env bash
# Tiering experiment 2 (docs/experiments/tiers.md): a job reads 20 input
# files in order from a slow hdd tier, with and without `sluice file prefetch`.
# The hdd and mem data servers are capped (HDD_MBPS, MEM_MBPS: 20 and 300
# MB/s, ratio 15; ONFS reports 16× from memory over HDD). Per run:
#   hdd       the inputs are on hdd; the job reads them (no prefetch)
#   prefetch  the same inputs, staged on hdd again, are handed to
#             `sluice file prefetch` when the job is queued; the job starts when
#             the first file is on mem and reads them all (the read time
#             includes waiting for promotions that have not finished)
#   mem       the job starts once every file is on mem (the speed-up ONFS
#             measures: memory against HDD)
# Each case runs RUNS times; speed-ups are against hdd in the same run.
#
#   bash bench/tiers/prefetch.sh            # 3 runs, ~4 min
#   SMOKE=1 bash bench/tiers/prefetch.sh    # 1 run, 6 small files
#
# Raw results: bench/tiers/prefetch.jsonl (OUT).
set -euo pipefail
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} FILES=${FILES:-20} MIB=${MIB:-8}
HDD_MBPS=${HDD_MBPS:-20} MEM_MBPS=${MEM_MBPS:-300}
if [ "$SMOKE" = 1 ]; then RUNS=1 FILES=6 MIB=4; fi
OUT=${OUT:-bench/tiers/prefetch.jsonl}
source "$(dirname "$0")/common.sh" prefetch
onall() { # TIER FILE... → 0 when every file's chunks are all on TIER
	local tier=$1 f out all on
	shift
	for f in "$@"; do
		out=$($S file stat --dir "$WORK/state" "$f")
		all=$(grep -c "^  chunk .* tier " <<< "$out" || true)
		on=$(grep -c "^  chunk .* tier $tier " <<< "$out" || true)
		[ "$all" -gt 0 ] && [ "$all" = "$on" ] || return 1
	done
}
for run in $(seq 1 "$RUNS"); do
	$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem 512M --ssd 0 --hdd 2G --pfs none \
		--data-max-mbps "$MEM_MBPS" --hdd-max-mbps "$HDD_MBPS" >/dev/null
	files=()
	for i in $(seq -w 1 "$FILES"); do
		head -c $((MIB << 20)) /dev/urandom > "$WORK/mnt/in$i"
		files+=("$WORK/mnt/in$i")
	done
	for mode in hdd prefetch mem; do
		$S file migrate --dir "$WORK/state" --tier hdd "${files[@]}" >/dev/null
		t0=$(date +%s.%N)
		case $mode in
		prefetch)
			$S file prefetch --dir "$WORK/state" --job "pf-$run" "${files[@]}" >/dev/null
			until onall mem "${files[0]}"; do sleep 0.05; done ;;
		mem)
			$S file prefetch --dir "$WORK/state" --job "mem-$run" "${files[@]}" >/dev/null
			until onall mem "${files[@]}"; do sleep 0.1; done ;;
		esac
		t1=$(date +%s.%N)
		r=$(python3 bench/tiers/reader.py "${files[@]}")
		python3 -c 'import json,sys; r=json.loads(sys.argv[4]); r.update(mode=sys.argv[1], run=int(sys.argv[2]), wait_secs=round(float(sys.argv[3]),3), hdd_mbps=float(sys.argv[5]), mem_mbps=float(sys.argv[6])); print(json.dumps(r))' \
			"$mode" "$run" "$(echo "$t1 - $t0" | bc)" "$r" "$HDD_MBPS" "$MEM_MBPS" | tee -a "$WORK/results.jsonl"
	done
	$S cluster down --dir "$WORK/state" --purge >/dev/null
	[ "${KEEP:-0}" = 1 ] && cp -r "$WORK/state/logs" "/tmp/sluice-prefetch-logs-$run"
	rm -rf "$WORK/state"
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/tiers/report.py prefetch "$OUT"
