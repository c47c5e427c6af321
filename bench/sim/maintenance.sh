#!/usr/bin/env bash
# Simulator: maintenance on a day of taihulight (docs/experiments/sim.md,
# "5. Maintenance"): K consecutive forwarding nodes of the fixed mapping's
# 80 (fwd0000…, a cabinet's worth and more) taken down for HOURS, under
# FFM and DFRA; and one case on the storage side, TARGETS targets (groups
# 0…, three per group) down for an hour. The window is placed where the
# measured day's jobs run: it starts at the median start of the day's
# jobs in the run without maintenance, less half the window (the log's
# jobs wait many hours in the queue, so they run well after they are
# submitted). Each case on three days of the NASA iPSC log after a week of
# warm-up. Per case and policy: the day's jobs whose I/O overlapped the
# window in the run without it, their I/O time against that run, the
# day's I/O-intensive mean, the jobs remapped off the nodes going down,
# and where the window's jobs went (forwarding nodes they used, per job
# and in all, the most of them on one).
#   bash bench/sim/maintenance.sh [OUT]   (default: bench/sim/maintenance-results.jsonl; ~2 min)
#   SMOKE=1 bash bench/sim/maintenance.sh (one day, K=40; checked)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=${1:-bench/sim/maintenance-results.jsonl}
TMP=$(mktemp -d /tmp/sluice-simmaint.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp "$(bench_sluice)" "$TMP/sluice"
S=$TMP/sluice
LOG=${SLUICE_SWF:-sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz}
DAYS=${DAYS:-168 336 504} KS=${KS:-8 40 80} HOURS=${HOURS:-8} TARGETS=${TARGETS:-24}
if [ -n "${SMOKE:-}" ]; then DAYS=168 KS=40 OUT=$TMP/smoke.jsonl; fi
: > "$OUT"
run() { # day case change...
	local d=$1 c=$2
	shift 2
	"$S" sim day --machine taihulight --swf "$LOG" --from "${d}h" --for 24h --warmup 168h --quiet --out "$TMP/$d-$c" "$@" > /dev/null
}
for d in $DAYS; do
	run "$d" base
	# the window: centred on the median start of the day's jobs (FFM's run)
	at=$(python3 - "$TMP/$d-base/jobs-ffm.jsonl" "$HOURS" <<'PY'
import json, statistics, sys
st = [j["start"] for j in map(json.loads, open(sys.argv[1])) if not j.get("warmup")]
print(int(statistics.median(st) - float(sys.argv[2]) * 1800))
PY
)
	for k in $KS; do
		run "$d" "fwds-$k" "--change=at=${at}s for=${HOURS}h fwds=fwd0000..fwd$(printf %04d $((k - 1))) factor=0"
	done
	run "$d" "targets-$TARGETS" "--change=at=${at}s for=1h targets=ost00000..ost$(printf %05d $((TARGETS - 1))) factor=0"
	for c in $(cd "$TMP" && ls -d "$d"-* | sed "s/^$d-//"); do
		python3 - "$TMP" "$d" "$c" "$at" "$HOURS" >> "$OUT" <<'PY'
import json, sys
from collections import Counter
tmp, day, case, at, hours = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
end = at + (3600 if case.startswith("targets") else hours * 3600)
s = json.load(open(f"{tmp}/{day}-{case}/summary.json"))
for p in ("ffm", "dfra"):
    base = {j["id"]: j for j in map(json.loads, open(f"{tmp}/{day}-base/jobs-{p}.jsonl")) if not j.get("warmup")}
    jobs = {j["id"]: j for j in map(json.loads, open(f"{tmp}/{day}-{case}/jobs-{p}.jsonl")) if not j.get("warmup")}
    win = [i for i, j in base.items() if j["start"] < end and j["end"] > at and j["io_time"] > 0]
    use = Counter(f for i in win for f in jobs[i]["fwd_ids"])
    ch = s.get(p + "_changes") or []
    st = s[p]
    print(json.dumps({"day": day, "case": case, "policy": p, "window_s": [at, end], "window_jobs": len(win),
                      "window_io_s": sum(jobs[i]["io_time"] for i in win), "window_io_base_s": sum(base[i]["io_time"] for i in win),
                      "window_slowdowns": [round(jobs[i]["io_time"] / base[i]["io_time"], 4) for i in win],
                      "window_intensive_slowdowns": [round(jobs[i]["io_time"] / base[i]["io_time"], 4) for i in win
                                                     if jobs[i]["bytes"] > 2**30 and jobs[i]["io_nodes"] > 1],
                      "window_fwds": len(use), "window_most_on_one_fwd": max(use.values(), default=0),
                      "window_fwds_per_job": sum(len(jobs[i]["fwd_ids"]) for i in win) / max(1, len(win)),
                      "intensive_mean_io_s": st["intensive_mean_io_s"], "mean_io_s": st["mean_io_s"],
                      "remaps": sum(c.get("remaps", 0) for c in ch), "changes": ch}))
PY
	done
done
bench_stamp "$OUT"
python3 bench/sim/maintenance_report.py "$OUT" ${SMOKE:+--check}
