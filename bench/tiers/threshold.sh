#!/usr/bin/env bash
# Tiering experiment 1 (docs/experiments/tiers.md): a job writes four times
# the mem tier's budget, file after file, through a local cluster whose mem
# and ssd data servers are capped to a real machine's ratio (ONFS: 3400 MB/s
# DS-m over 112 MB/s HDD, ~30×; here mem 600 MB/s, ssd 20 MB/s). Two write
# patterns, each under two configurations:
#   onfs   --tiering auto: files move down as free space falls below Cn-m;
#          writes needing a new chunk at Cs-w wait while files move off
#          (thresholds FREE: Cn-m a third of the budget)
#   onfs-burst  the same with Cn-m sized to hold a burst (FREE_BURST)
#   spill  --tiering manual: nothing moves; a full tier spills new chunks to
#          the next one (the static "spill on full" baseline)
# Patterns: stream (one continuous write) and bursts (checkpoint-like:
# 3/4 of the budget, then a pause). Each case runs RUNS times; each run
# records the writer's figures, the mem tier's usage every 250 ms with the
# policy's mode, and where the data ended up.
#
#   bash bench/tiers/threshold.sh            # 3 runs per case, ~8 min
#   SMOKE=1 bash bench/tiers/threshold.sh    # 1 run, small sizes
#   # more runs of some cases, numbered on (added to a copy of the set)
#   PATTERNS=bursts FIRST_RUN=4 OUT=/tmp/more.jsonl bash bench/tiers/threshold.sh
#
# Raw results: bench/tiers/threshold.jsonl (OUT); summary: report.py threshold.
set -euo pipefail
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3}
MEM=${MEM:-64}          # MiB
MEM_MBPS=${MEM_MBPS:-600}
SSD_MBPS=${SSD_MBPS:-20}
FREE=${FREE:-4M,12M,24M} # Cs-w, Cf-m, Cn-m
if [ "$SMOKE" = 1 ]; then RUNS=1; MEM=16; FREE=2M,4M,8M; fi
TOTAL=$((4 * MEM)) BURST=$((3 * MEM / 4)) PAUSE=${PAUSE:-3}
CSW=${FREE%%,*}
FREE_BURST=${FREE_BURST:-$CSW,$((BURST / 4))M,$((BURST + ${CSW%M}))M}
OUT=${OUT:-bench/tiers/threshold.jsonl}
source "$(dirname "$0")/common.sh" tiers
for run in $(seq "${FIRST_RUN:-1}" $((${FIRST_RUN:-1} + RUNS - 1))); do
	for pattern in ${PATTERNS:-stream bursts}; do
		for mode in ${MODES:-onfs onfs-burst spill}; do
			tiering=auto free=$FREE
			[ "$mode" = spill ] && tiering=manual
			[ "$mode" = onfs-burst ] && free=$FREE_BURST
			"$BIN" cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem "${MEM}M" --ssd 4G --pfs none \
				--data-max-mbps "$MEM_MBPS" --ssd-max-mbps "$SSD_MBPS" \
				--meta-flags "--tiering $tiering --tier-free $free" >/dev/null
			rm -f "$WORK/stop"
			python3 bench/tiers/sample.py "$BIN" "$WORK/state" 0.25 "$WORK/stop" > "$WORK/timeline.json" &
			SAMPLER=$!
			burst=$TOTAL
			[ "$pattern" = bursts ] && burst=$BURST
			SLURM_JOB_ID="$mode-$pattern-$run" python3 bench/tiers/writer.py "$WORK/mnt" "$TOTAL" "$burst" "$PAUSE" 4 > "$WORK/writer.json"
			sleep 3 # the policy settles
			touch "$WORK/stop"
			wait "$SAMPLER"
			onmem=0 onssd=0
			for f in "$WORK"/mnt/f*; do
				case "$("$BIN" file stat --dir "$WORK/state" "$f")" in
				*"tier mem"*) onmem=$((onmem + 1)) ;;
				*) onssd=$((onssd + 1)) ;;
				esac
			done
			migrated=$("$BIN" cluster status --dir "$WORK/state" | sed -n 's/^TIERING *\([0-9]*\) files.*/\1/p')
			python3 - "$mode" "$pattern" "$run" "$onmem" "$onssd" "${migrated:-0}" "$WORK/writer.json" "$WORK/timeline.json" \
				"$MEM" "$free" "$MEM_MBPS" "$SSD_MBPS" >> "$WORK/results.jsonl" <<'PY'
import json, sys
mode, pattern, run, onmem, onssd, migrated, wj, tj, mem, free, mm, sm = sys.argv[1:]
w = json.load(open(wj))
print(json.dumps({"mode": mode, "pattern": pattern, "run": int(run), "mem_mib": int(mem), "tier_free": free,
                  "mem_mbps": float(mm), "ssd_mbps": float(sm), "writer": w, "files_on_mem": int(onmem),
                  "files_on_ssd": int(onssd), "files_migrated": int(migrated), "timeline": json.load(open(tj))}))
PY
			tail -n1 "$WORK/results.jsonl" | python3 -c 'import json,sys; r=json.load(sys.stdin); w=r["writer"]; print(r["mode"], r["pattern"], "run", r["run"], ":", w["mbps"], "MB/s,", len(w["errors"]), "errors, bursts", [b["mbps"] for b in w["bursts"]], "; on mem", r["files_on_mem"], "migrated", r["files_migrated"])'
			down
		done
	done
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/tiers/report.py threshold "$OUT"
