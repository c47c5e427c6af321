#!/usr/bin/env bash
# Mem-tier replicas (docs/tiering.md, "Mem-tier replicas"): what a second
# copy costs and what it buys. Three mem servers, each its own failure
# domain. Per run and per case (--mem-replicas 1 and 2): fio writes 2 ×
# 64 MiB (bs 1 MiB, O_DIRECT, fsync at the end) and reads it back; with 2
# copies a reader then runs for 8 s (bs 1 MiB, time based) while data-mem
# is killed with kill -9 at 2 s: fio's errors and its slowest read show
# the failover stall (the forwarding daemon's Failover, 1 s by default).
#
#   bash bench/tiers/replicas.sh            # 3 runs, ~3 min
#   SMOKE=1 bash bench/tiers/replicas.sh    # 1 run
#
# Raw results: bench/tiers/replicas.jsonl (OUT).
set -euo pipefail
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3}
[ "$SMOKE" = 1 ] && RUNS=1
OUT=${OUT:-bench/tiers/replicas.jsonl}
source "$(dirname "$0")/common.sh" replicas
fio_json() { fio --output-format=json "$@" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["jobs"][0]))'; }
for run in $(seq 1 "$RUNS"); do
	for copies in 1 2; do
		$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem 512M --ssd 1G --pfs none \
			--mem-servers 3 --mem-replicas "$copies" >/dev/null
		mkdir "$WORK/mnt/d"
		common=(--directory="$WORK/mnt/d" --name=rep --ioengine=psync --direct=1 --iomem_align=4096 --bs=1m --size=64m
			--numjobs=2 --group_reporting)
		w=$(fio_json "${common[@]}" --rw=write --end_fsync=1)
		r=$(fio_json "${common[@]}" --rw=read)
		f='{}'
		if [ "$copies" = 2 ]; then
			(sleep 2; kill -9 "$(python3 -c 'import json,sys; print([d["Pid"] for d in json.load(open(sys.argv[1]))["Daemons"] if d["Name"]=="data-mem"][0])' "$WORK/state/cluster.json")") &
			f=$(fio_json "${common[@]}" --rw=read --time_based --runtime=8 --continue_on_error=none)
			wait
		fi
		python3 - "$copies" "$run" "$w" "$r" "$f" >> "$WORK/results.jsonl" <<'PY'
import json, sys
copies, run, w, r, f = sys.argv[1:]
w, r, f = json.loads(w), json.loads(r), json.loads(f)
row = {"copies": int(copies), "run": int(run), "write_mbps": w["write"]["bw_bytes"] / 1e6, "read_mbps": r["read"]["bw_bytes"] / 1e6}
if f:
    row["failover"] = {"errors": f["error"], "read_mbps": f["read"]["bw_bytes"] / 1e6,
                       "max_ms": f["read"]["clat_ns"]["max"] / 1e6, "reads": f["read"]["total_ios"]}
print(json.dumps(row))
PY
		tail -n1 "$WORK/results.jsonl"
		down
	done
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/tiers/report.py replicas "$OUT"
