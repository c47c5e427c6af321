#!/usr/bin/env bash
# Tiering experiment 3 (docs/experiments/tiers.md): a checkpoint/restart
# cycle of a job larger than the mem tier. The job writes 5 checkpoint
# versions of 48 MiB (12 files of 4 MiB, written, fsynced and closed) with
# 3 s of computation between them, 240 MiB in all through a 64 MiB mem tier
# (600 MB/s) over an ssd tier (20 MB/s); then a restart job reads the last
# version. Two configurations, same daemons:
#   onfs-burst  --tiering auto, Cn-m sized to hold one version
#               (Cs-w, Cf-m, Cn-m = 4, 12, 52 MiB)
#   spill       --tiering manual: nothing moves; a full tier spills
# Per run: each checkpoint's write bandwidth, the restart's read bandwidth
# and the share of its bytes each tier served (Beacon's ReadTiers).
#
#   bash bench/tiers/checkpoint.sh            # 3 runs per case, ~5 min
#   SMOKE=1 bash bench/tiers/checkpoint.sh    # 1 run, small sizes
#
# Raw results: bench/tiers/checkpoint.jsonl (OUT).
set -euo pipefail
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} MEM=${MEM:-64} MEM_MBPS=${MEM_MBPS:-600} SSD_MBPS=${SSD_MBPS:-20} PAUSE=${PAUSE:-3}
FREE_BURST=${FREE_BURST:-4M,12M,52M}
if [ "$SMOKE" = 1 ]; then RUNS=1 MEM=16 FREE_BURST=2M,4M,14M; fi
VERSION=$((3 * MEM / 4)) # MiB per checkpoint version
OUT=${OUT:-bench/tiers/checkpoint.jsonl}
source "$(dirname "$0")/common.sh" ckpt
for run in $(seq 1 "$RUNS"); do
	for mode in onfs-burst spill; do
		tiering=auto
		[ "$mode" = spill ] && tiering=manual
		$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem "${MEM}M" --ssd 4G --pfs none \
			--data-max-mbps "$MEM_MBPS" --ssd-max-mbps "$SSD_MBPS" \
			--meta-flags "--tiering $tiering --tier-free $FREE_BURST" >/dev/null
		mkdir "$WORK/mnt/ckpt"
		SLURM_JOB_ID="ckpt-$mode-$run" python3 bench/tiers/writer.py "$WORK/mnt/ckpt" $((5 * VERSION)) "$VERSION" "$PAUSE" 4 > "$WORK/writer.json"
		sleep "$PAUSE" # the job's last computation step, then it ends
		last=()
		n=$(ls "$WORK/mnt/ckpt" | wc -l)
		for f in $(ls "$WORK/mnt/ckpt" | tail -n $((VERSION / 4))); do last+=("$WORK/mnt/ckpt/$f"); done
		SLURM_JOB_ID="restart-$mode-$run" python3 bench/tiers/reader.py "${last[@]}" > "$WORK/reader.json"
		sleep 3 # Beacon's records of the restart reach the store
		tiers=$($S job --dir "$WORK/state" --json "restart-$mode-$run" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("ReadTiers") or {}))')
		python3 - "$mode" "$run" "$WORK/writer.json" "$WORK/reader.json" "$tiers" "$MEM" "$MEM_MBPS" "$SSD_MBPS" "$n" >> "$WORK/results.jsonl" <<'PY'
import json, sys
mode, run, wj, rj, tiers, mem, mm, sm, n = sys.argv[1:]
print(json.dumps({"mode": mode, "run": int(run), "writer": json.load(open(wj)), "restart": json.load(open(rj)),
                  "read_tiers": json.loads(tiers), "mem_mib": int(mem), "mem_mbps": float(mm), "ssd_mbps": float(sm), "files": int(n)}))
PY
		tail -n1 "$WORK/results.jsonl" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["mode"], "run", r["run"], ": checkpoints", [b["mbps"] for b in r["writer"]["bursts"]], "MB/s; restart", r["restart"]["mbps"], "MB/s from", r["read_tiers"])'
		down
	done
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/tiers/report.py checkpoint "$OUT"
