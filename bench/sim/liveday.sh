#!/usr/bin/env bash
# A generated day, live and simulated (docs/experiments/sim.md,
# "Validation → A generated day"): an hour of the job log
# (sim/testdata's NASA iPSC log, hour FROM) given I/O by `sluice sim
# --gen-jobs` for `--machine local` of a small cluster (two forwarding
# daemons capped at FWD_MBPS, four emulated compute nodes), scaled in
# time (TS: an hour in two minutes) and volume (VS), written out as run
# (`sluice workload --jobs … --as-run`: ranks, bytes, operations and
# computation as the live run does them), then run live by `sluice
# workload --jobs --compute-nodes 4` (the jobs wait for their nodes as the
# simulator's do) and simulated by `sluice sim day --machine local` of the
# same running cluster. RUNS runs, each on a fresh cluster.
#   bash bench/sim/liveday.sh               # RUNS=3, ~8 min
#   SMOKE=1 bash bench/sim/liveday.sh       # one run of 20 minutes of the log; checked
# Raw results: $OUT (JSON Lines, one per job and run: the nodes it got
# live, the forwarding nodes the fixed mapping gave them, the live and
# simulated wait and I/O time), the jobs as run beside it (-jobs.jsonl);
# tables: python3 bench/sim/liveday_report.py $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
CACHE=${CACHE:-0} # the mount's block cache: the simulator models none
RUNS=${RUNS:-3} FWD_MBPS=${FWD_MBPS:-40} FROM=${FROM:-186h} FOR=${FOR:-1h} TS=${TS:-0.033} VS=${VS:-3e-4}
OUT=${OUT:-bench/sim/liveday-results.jsonl}
if [ "$SMOKE" = 1 ]; then
	RUNS=1 FROM=186h30m FOR=20m OUT=${OUT_SMOKE:-/tmp/sluice-liveday-smoke.jsonl}
fi
LOG=${SLUICE_SWF:-sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz}
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d /tmp/sluice-liveday.XXXXXX)
cleanup() { $S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
: > "$WORK/results.jsonl"
for run in $(seq 1 "$RUNS"); do
	$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 2 --mem 2G --ssd 0 --pfs none \
		--fwd-max-mbps "$FWD_MBPS" --fwd-policy ffm --meta-flags "--fwd-ratio 2" --mount-flags "--read-cache $CACHE" >/dev/null
	if [ "$run" = 1 ]; then
		$S sim day --machine local --dir "$WORK/state" --swf "$LOG" --from "$FROM" --for "$FOR" --warmup 0 --gen-jobs "$WORK/raw.jsonl" --quiet
		$S workload --jobs "$WORK/raw.jsonl" --time-scale "$TS" --volume-scale "$VS" --as-run > "$WORK/jobs.jsonl"
		cp "$WORK/jobs.jsonl" "${OUT%.jsonl}-jobs.jsonl"
	fi
	$S workload --jobs "$WORK/jobs.jsonl" --compute-nodes 4 --register --state "$WORK/state" "$WORK/mnt/live" > "$WORK/live.jsonl"
	# the simulator runs each job on the nodes it got live (the scheduler
	# is the same, but a job ending a little earlier or later there frees
	# another node, on another forwarding node, for the next): "sim", the
	# schedule's and the I/O model's agreement together. "pinned": each job
	# also submitted when it started live, so that it shares its forwarding
	# node with the jobs it shared it with live (the I/O model's agreement
	# alone; the schedule's drift is in the waits)
	python3 - "$WORK/jobs.jsonl" "$WORK/live.jsonl" "$WORK/asrun.jsonl" "$WORK/pinned.jsonl" <<'PY'
import json, sys
live = {j["id"]: j for j in map(json.loads, open(sys.argv[2]))}
with open(sys.argv[3], "w") as asrun, open(sys.argv[4], "w") as pinned:
    for l in open(sys.argv[1]):
        j = json.loads(l)
        lj = live[j["id"]]
        j["on_nodes"] = lj.get("on_nodes")
        print(json.dumps(j), file=asrun)
        j["submit"] = lj["start"]
        print(json.dumps(j), file=pinned)
PY
	for how in asrun pinned; do
		rm -rf "$WORK/sim-$how"
		$S sim day --machine local --dir "$WORK/state" --jobs "$WORK/$how.jsonl" --policy ffm --quiet --out "$WORK/sim-$how" >/dev/null
	done
	python3 - "$run" "$WORK/live.jsonl" "$WORK/sim-asrun/jobs-ffm.jsonl" "$WORK/sim-pinned/jobs-ffm.jsonl" >> "$WORK/results.jsonl" <<'PY'
import json, sys
run, live, sim, pinned = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = {j["id"]: j for j in map(json.loads, open(sim))}
p = {j["id"]: j for j in map(json.loads, open(pinned))}
for l in open(live):
    j = json.loads(l)
    m = s[j["id"]]
    print(json.dumps({"run": run, "id": j["id"], "kind": j["kind"], "ranks": j["ranks"], "bytes": j["bytes"], "ops": j["ops"],
                      "on_nodes": j.get("on_nodes"), "fwds": m["fwd_ids"],
                      "live_wait": round(j["start"] - j["submit"], 3), "sim_wait": m["wait"],
                      "live": j["io_time"], "sim": m["io_time"],
                      "pinned": p[j["id"]]["io_time"], "pinned_wait": p[j["id"]]["wait"], "error": j.get("error", "")}))
PY
	$S cluster down --dir "$WORK/state" --purge >/dev/null
	rm -rf "$WORK/state"
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
if [ "$SMOKE" = 1 ]; then
	python3 bench/sim/liveday_report.py --check "$OUT"
fi
python3 bench/sim/liveday_report.py "$OUT"
