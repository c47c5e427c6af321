#!/usr/bin/env bash
# The simulator's fail-slow storage targets against live runs
# (docs/experiments/sim.md, "Fail-slow targets, live and on --machine
# local"): four mem data servers capped at DATA_MBPS each, round-robin
# placement (so every server keeps load), the first one slowed
# `sluice cluster fault --slow FACTOR` before the jobs start; the same jobs (one
# workload description) run live by `sluice workload --jobs` while
# `sluice cluster status` is polled for the FAIL-SLOW flag, and in `sluice sim
# --machine local --slow-targets 1 --slow-factor FACTOR --detect` with
# the daemons' detector cadence (1 s windows, 30 s span, a check every
# 5 s, records reaching it up to a window after they close). `fault --slow F` divides a capped server's buckets by F and
# multiplies its service time by F (alone, 128 MiB by dd with a quarter on
# the slowed server: 8.4 s against 0.8 healthy): the device F times
# slower, as the simulator's target.
#   bash bench/sim/liveslow.sh              # RUNS=3, ~2 min
#   SMOKE=1 bash bench/sim/liveslow.sh      # one run, smaller jobs
#   UP_FLAGS=--mem-huge=false OUT=bench/sim/liveslow-results-plain.jsonl bash bench/sim/liveslow.sh
#   RECORDS=DIR bash bench/sim/liveslow.sh  # also keep each run's data-server records
#                                           # and their replay through the detector in DIR
# Live detection is reported three ways: when the `sluice cluster status` poll
# first showed the flag (every 0.5 s; a status call waits on every
# server, the slowed one too), when the manager logged it (its checks
# come every 5 s, at a phase of their own), and the first second at which
# a check would have named the server from the records the data servers
# shipped (bench/sim/slowreplay: the records' own verdict, whatever the
# checks' phase).
# Raw results: $OUT (JSON Lines, one per run: live and simulated job
# times, detection times), then a table; fails if the daemons did not
# flag the slowed server.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} DATA_MBPS=${DATA_MBPS:-40} FACTOR=${FACTOR:-10} MIB=${MIB:-256}
OUT=${OUT:-bench/sim/liveslow-results.jsonl}
if [ "$SMOKE" = 1 ]; then
	RUNS=1 MIB=128 OUT=${OUT_SMOKE:-/tmp/sluice-liveslow-smoke.jsonl}
fi
RECORDS=${RECORDS:-}
UP_FLAGS=${UP_FLAGS:-} # extra `sluice cluster up` flags, e.g. --mem-huge=false
BIN=$(bench_sluice)
bench_tool sim/slowreplay >/dev/null
[ -z "$RECORDS" ] || mkdir -p "$RECORDS"
S=$BIN
WORK=$(mktemp -d /tmp/sluice-liveslow.XXXXXX)
cleanup() { $S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
b=$((MIB << 20))
cat > "$WORK/jobs.jsonl" <<JOBS
{"id":"s1","app":"w1","submit":0,"nodes":2,"on_nodes":[0,1],"compute":0,"pattern":"N-N","class":"bw","read":$b,"write":$b,"phases":1,"meta_ops":0}
{"id":"s2","app":"w2","submit":0,"nodes":2,"on_nodes":[2,3],"compute":0,"pattern":"N-N","class":"bw","read":$b,"write":$b,"phases":1,"meta_ops":0}
JOBS
: > "$WORK/results.jsonl"
for run in $(seq 1 "$RUNS"); do
	$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 2 --mem-servers 4 --mem 1G --ssd 0 --pfs none \
		--data-max-mbps "$DATA_MBPS" --fwd-policy ffm --meta-flags "--fwd-ratio 2 --placement rr" $UP_FLAGS >/dev/null
	# the first mem data server of cluster.json is the simulator's target 0
	addr=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
for d in c["Daemons"]:
    a = d["Args"]
    if a and a[0] == "data" and "mem" in a:
        print(a[a.index("--listen") + 1]); break' "$WORK/state/cluster.json")
	id=$($S cluster status --dir "$WORK/state" | awk -v a="$addr" '$2 == "data" && $4 == a {print $1}')
	fault_ns=$(date +%s%N)
	$S cluster fault --dir "$WORK/state" --server "$id" --slow "$FACTOR" >/dev/null
	t0=$(date +%s.%N)
	( while :; do
		if $S cluster status --dir "$WORK/state" 2>/dev/null | grep -q FAIL-SLOW; then
			$S cluster status --dir "$WORK/state" | awk '/FAIL-SLOW/ {print $1}' | head -1 > "$WORK/flagged"
			python3 -c "import sys,time; print(time.time() - float(sys.argv[1]))" "$t0" > "$WORK/flag-after"; break
		fi
		sleep 0.5
	done ) &
	poll=$!
	$S workload --jobs "$WORK/jobs.jsonl" --register --state "$WORK/state" "$WORK/mnt/live" > "$WORK/live.jsonl"
	# keep polling a while after the jobs (detection runs every 5 s)
	for _ in $(seq 1 20); do kill -0 $poll 2>/dev/null || break; sleep 0.5; done
	kill $poll 2>/dev/null || true; wait $poll 2>/dev/null || true
	$S monitor records --dir "$WORK/state" --layer data --json > "$WORK/records.jsonl"
	bin/slowreplay --fault "$fault_ns" < "$WORK/records.jsonl" > "$WORK/replay.txt"
	grep -h "fail-slow server detected" "$WORK"/state/logs/meta* > "$WORK/detected.log" || true
	if [ -n "$RECORDS" ]; then
		cp "$WORK/records.jsonl" "$RECORDS/records-$run.jsonl"
		{ echo "# run $run: server $id slowed at $fault_ns; the manager's log:"; cat "$WORK/detected.log"; cat "$WORK/replay.txt"; } > "$RECORDS/replay-$run.txt"
	fi
	rm -rf "$WORK/sim"
	$S sim day --machine local --dir "$WORK/state" --jobs "$WORK/jobs.jsonl" --policy ffm --placement rr \
		--slow-targets 1 --slow-factor "$FACTOR" --detect --detect-window 1s --detect-span 30s --detect-every 5s --detect-lag 1s \
		--quiet --out "$WORK/sim" >/dev/null
	python3 - "$run" "$id" "$WORK" "$fault_ns" >> "$WORK/results.jsonl" <<'PY'
import datetime, json, os, re, sys
run, slowed, w, fault = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]) / 1e9
# the manager's own moment: its log line's time (slog, RFC 3339 UTC)
logged = None
for l in open(w + "/detected.log"):
    m = re.match(r"time=(\S+)", l)
    if m and ("server=data-mem-%s " % slowed) in l:
        logged = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - fault
        break
m = re.search(r"first check that names a server: \+(\d+)s", open(w + "/replay.txt").read())
records = float(m.group(1)) if m else None
live = {j["id"]: j for j in map(json.loads, open(w + "/live.jsonl"))}
sim = {j["id"]: j for j in map(json.loads, open(w + "/sim/jobs-ffm.jsonl"))}
summ = json.load(open(w + "/sim/summary.json"))
det = summ.get("ffm_detections") or []
flag = float(open(w + "/flag-after").read()) if os.path.exists(w + "/flag-after") else None
flagged = open(w + "/flagged").read().strip() if os.path.exists(w + "/flagged") else ""
print(json.dumps({"run": run, "slowed": slowed, "live_flagged": flagged, "live_flag_s": flag,
                  "live_logged_s": logged, "records_allow_s": records,
                  "sim_detected": [d.get("target") or d.get("fwd") for d in det], "sim_detect_s": [d["at_s"] for d in det],
                  "live": {k: v["io_time"] for k, v in live.items()}, "sim": {k: v["io_time"] for k, v in sim.items()},
                  "errors": [v.get("error", "") for v in live.values() if v.get("error")]}))
PY
	rm -f "$WORK/flag-after" "$WORK/flagged"
	$S cluster down --dir "$WORK/state" --purge >/dev/null
	rm -rf "$WORK/state"
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| run | slowed | live: flagged, after (s) | manager's log (s) | records allow (s) | simulator: detected, at (s) | s1 live / sim (s) | s2 live / sim (s) |")
print("|---|---|---|---|---|---|---|---|")
opt = lambda v: "%.1f" % v if v is not None else "-"
for r in rows:
    fl = "%s, %.1f" % (r["live_flagged"], r["live_flag_s"]) if r["live_flag_s"] is not None else "none"
    sd = ", ".join("%s at %.0f" % x for x in zip(r["sim_detected"], r["sim_detect_s"])) or "none"
    print("| %d | %s | %s | %s | %s | %s | %.1f / %.1f | %.1f / %.1f |" % (r["run"], r["slowed"], fl,
          opt(r.get("live_logged_s")), opt(r.get("records_allow_s")), sd,
          r["live"]["s1"], r["sim"]["s1"], r["live"]["s2"], r["sim"]["s2"]))
bad = [r for r in rows if r["errors"] or r["live_flagged"] != r["slowed"]]
if bad:
    sys.exit("liveslow: the daemons did not flag the slowed server (or a job failed) in %d runs" % len(bad))
PY
