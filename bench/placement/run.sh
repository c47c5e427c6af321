#!/usr/bin/env bash
# The performance-aware placement experiment (docs/experiments/placement.md),
# the Sunway paper's §5 set-up scaled to this machine:
#   servers  8 mem-tier data servers capped at 500, 300, 500, 200, 300, 100,
#            500, 200 units (Table 2), one unit = UNIT MB/s (default 0.025:
#            65 MB/s in all, well under what this 2-core machine's mount,
#            forwarding and data daemons move, so the servers are the
#            contested resource); each measures its own max_perf with its
#            write probe (`sluice cluster status` shows it)
#   job      N-N: N ranks (`sluice workload --kind ckpt --bursts 1`), each
#            writing its own file of TOTAL/N bytes in 1 MiB requests,
#            started together (the workload's start barrier)
#   policies --placement perf | rr | wrandom (one metadata flag)
# For every N the job's aggregate bandwidth (bytes / span from the first
# rank's start to the last rank's end) is a share of Σ max_perf, and the
# bytes each server got are kept (the policy's decisions).
#
#   bash bench/placement/run.sh                   # N = 8..128, 3 runs, ~25 min
#   NS="8 32" RUNS=1 bash bench/placement/run.sh
#   SMOKE=1 bash bench/placement/run.sh           # N = 8, perf and rr, small
#   CHUNK=4M bash bench/placement/run.sh          # sluice's default chunk size
#
# Raw results: bench/placement/results.jsonl (OUT); table: report.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} NS=${NS:-8 16 32 64 128} POLICIES=${POLICIES:-perf rr wrandom}
UNIT=${UNIT:-0.025} TOTAL=${TOTAL:-384} OUT=${OUT:-bench/placement/results.jsonl}
# the job directory's chunk size (Lustre's default stripe size): a chunk
# is the unit placement decides, and at these scaled-down rates a 4 MiB
# chunk (sluice's default) is 1.7 s of the slowest server's time, longer
# than the queues the job keeps ahead of the servers, so the placement
# must leave that server idle or risk the job's tail on it
# (docs/experiments/placement.md shows both); CHUNK=4M for the default
CHUNK=${CHUNK:-1M}
# bulk workers of each forwarding daemon: a worker waits for its data
# server, so with the default 8 the slow servers' requests hold them all
# and the fast servers starve (docs/experiments/placement.md)
BULK=${BULK:-64}
# the mount's write-behind: one mount stands for the paper's 20-100
# clients, each with its own cache; a window shared by every rank fills
# with the slow servers' requests (they stay longest) and starves the
# fast ones
WB=${WB:-256M}
if [ "$SMOKE" = 1 ]; then
	RUNS=1 NS=8 POLICIES="perf rr" TOTAL=96
fi
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d /tmp/sluice-placement.XXXXXX)
cleanup() {
	[ "${KEEP:-0}" = 1 ] && return
	$S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
CAPS=$(python3 -c "print(','.join('%g' % (u * $UNIT) for u in (500, 300, 500, 200, 300, 100, 500, 200)))")
: > "$WORK/results.jsonl"
for run in $(seq 1 "$RUNS"); do
	for pol in $POLICIES; do
		$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem 1G --mem-servers 8 --ssd 0 --fwds 2 \
			--data-max-mbps "$CAPS" --device-burst 20ms --meta-flags "--placement $pol" --fwd-flags "--workers 16,16,$BULK" --mount-flags "--write-behind $WB" >/dev/null
		for n in $NS; do
			mkdir -p "$WORK/mnt/job"
			per=$((TOTAL * 1024 / n))K
			[ -n "$CHUNK" ] && $S file stripe --dir "$WORK/state" --chunk-size "$CHUNK" "$WORK/mnt/job" >/dev/null
			$S workload --kind ckpt --bursts 1 --ranks "$n" --size "$per" --json --results "$WORK/mnt/job" > "$WORK/job.json"
			$S cluster status --dir "$WORK/state" > "$WORK/status.txt"
			for f in "$WORK"/mnt/job/*; do
				$S file stat --dir "$WORK/state" "$f"
			done > "$WORK/stat.txt"
			python3 - "$WORK" "$pol" "$n" "$run" "$CAPS" >> "$WORK/results.jsonl" <<'EOF'
import json, re, sys
work, pol, n, run, caps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
job = json.load(open(work + "/job.json"))
# each server's max_perf as `sluice cluster status` shows it
maxperf = {}
for l in open(work + "/status.txt"):
    m = re.match(r"^(\d+)\s+data\s+mem\s+\S+\s+\S+\s+\S+ \S+\s+\S+ \S+\s+\S+\s+(\S+)", l)
    if m and l.rstrip().endswith(" up"):
        maxperf[m.group(1)] = float(m.group(2)[:-4]) if m.group(2).endswith("MB/s") else 0
# the placement's decisions: the bytes of every chunk, by server
got = {k: 0 for k in maxperf}
size = chunk = 0
for l in open(work + "/stat.txt"):
    if l.startswith("size:"):
        size = int(l.split()[1])
    elif l.startswith("chunk size:"):
        chunk = int(l.split()[2])
    m = re.match(r"\s+chunk (\d+)\s+tier \S+\s+servers \[(\d+)\]", l)
    if m:
        idx = int(m.group(1))
        got[m.group(2)] = got.get(m.group(2), 0) + max(0, min(chunk, size - idx * chunk))
span = job["Span"] / 1e9
res = job.get("Results") or []
print(json.dumps({"policy": pol, "n": n, "run": run, "chunk": chunk, "caps": [float(c) for c in caps.split(",")],
                  "bytes": job["Bytes"], "span": span, "mbps": job["Bytes"] / span / 1e6,
                  "slowest": job["Slowest"] / 1e9, "fastest": job["Fastest"] / 1e9, "median": job["Median"] / 1e9,
                  "rank_times": sorted(r["IOTime"] / 1e9 for r in res),
                  "maxperf": {k: maxperf[k] for k in sorted(maxperf, key=int)},
                  "placed": {k: got[k] for k in sorted(got, key=int)}}))
EOF
			tail -1 "$WORK/results.jsonl" | python3 -c "import json,sys; r=json.load(sys.stdin); print('%-8s N=%-4d run %d: %6.1f MB/s, ranks %.2f-%.2fs' % (r['policy'], r['n'], r['run'], r['mbps'], r['fastest'], r['slowest']))"
			rm -rf "$WORK/mnt/job"
		done
		$S cluster down --dir "$WORK/state" --purge >/dev/null
		rm -rf "$WORK/state" # the next cluster registers its servers afresh
	done
done
if [ "$SMOKE" = 1 ]; then
	python3 bench/placement/report.py --check "$WORK/results.jsonl"
else
	bench_stamp "$WORK/results.jsonl"
	cat "$WORK/results.jsonl" >> "$OUT"
	python3 bench/placement/report.py "$OUT"
fi
