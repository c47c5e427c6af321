#!/usr/bin/env bash
# Small files and directories through sluice against a same-machine FUSE
# passthrough (issue 18, goal 3; docs/benchmarks.md "Small files and
# directories"): bench/mdtest's phases, interleaved rounds, medians, and the
# requests each operation costs at every hop.
#
#   bash bench/smallfiles/run.sh            # N=3000 files of BYTES=4096, ROUNDS=3
#   N=500 ROUNDS=1 bash bench/smallfiles/run.sh   # smoke
#   SLUICE_BIN=/tmp/sluice-old COUNT=0 OUT=... bash bench/smallfiles/run.sh
#                                    # rates of another build, no round trips
#
# Rates: per round, both targets in turn (the order alternates), one
# mdtest run each with phases create (open O_CREAT|O_EXCL, write BYTES,
# close), stat, read (open, read all, close), unlink, mkdir, rmdir in a
# fresh directory, then tree-create and tree-remove (depth 3, 10 children
# per directory: 1,111 directories). Raw lines in OUT/rates.jsonl.
#
# Round trips: a separate sluice cluster with the mount logging every FUSE
# request (--debug) and every daemon's counters served (--pprof-base);
# each phase runs alone on COUNTN files and the counters' deltas divided
# by the operations give, per operation, the FUSE requests the kernel sent
# and the requests the forwarding daemon, the metadata service and the data
# server served, by kind (OUT/counts.json). Rates of that cluster are not
# used (logging every request slows the mount).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
N=${N:-3000}
BYTES=${BYTES:-4096}
ROUNDS=${ROUNDS:-3}
COUNTN=${COUNTN:-500}
OUT=${OUT:-bench/results/smallfiles}
UPFLAGS=${UPFLAGS:-${UP:-}} # extra `sluice cluster up` flags (UP, as bench/ab.sh sets it)
BASE=${BASE:-$((21000 + RANDOM % 200 * 10))}
COUNT=${COUNT:-1}
BIN=$(bench_sluice)
bench_tool mdtest >/dev/null
WORK=$(mktemp -d /tmp/sluice-small.XXXXXX)
SHM=$(mktemp -d /dev/shm/sluice-small.XXXXXX)
# shellcheck source=bench/passthrough.sh
. bench/passthrough.sh
cleanup() {
	set +e
	"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1
	"$BIN" cluster down --dir "$WORK/c" --purge >/dev/null 2>&1
	stop_passthrough "$WORK/pt"
	rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT
mkdir -p "$OUT"
: > "$OUT/rates.jsonl"
start_passthrough "$WORK/pt" "$SHM/pt"
# shellcheck disable=SC2086
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/sm" --mem 4G --ssd 0 --pfs none $UPFLAGS >/dev/null
declare -A DIRS=([passthrough]=$WORK/pt [sluice]=$WORK/sm)
# cpu_of TARGET: CPU seconds (user + system) its processes spent so far
cpu_of() {
	python3 - "$1" "$PT" "$WORK/s/cluster.json" <<'PY'
import json, sys
sys.path.insert(0, "bench")
from proc import cpu_seconds
t, pt, cj = sys.argv[1:4]
pids = [pt] if t == "passthrough" else [d["Pid"] for d in json.load(open(cj))["Daemons"]]
print(sum(cpu_seconds(p)[0] for p in pids))
PY
}
PHASES=create,stat,read,unlink,mkdir,rmdir
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then ORDER=(passthrough sluice); else ORDER=(sluice passthrough); fi
	for t in "${ORDER[@]}"; do
		c0=$(cpu_of "$t")
		a=$(bin/mdtest -n "$N" -bytes "$BYTES" -phases "$PHASES" "${DIRS[$t]}/r$r")
		b=$(bin/mdtest -depth 3 -branch 10 -phases tree-create,tree-remove "${DIRS[$t]}/t$r")
		c1=$(cpu_of "$t")
		echo "$a $b" | python3 -c '
import json, sys
f = sys.stdin.read().split()
n = int(sys.argv[3])
print(json.dumps({"target": sys.argv[1], "round": int(sys.argv[2]), "n": n, "bytes": int(sys.argv[4]),
                  "rates": {f[i]: float(f[i + 1]) for i in range(0, len(f), 2)},
                  # CPU of every process of the target (daemons, etcd members, mount;
                  # or the passthrough) over the six phases of n and the tree of 1,111
                  "cpu_s": float(sys.argv[6]) - float(sys.argv[5]), "ops": 6 * n + 2 * 1111}))' "$t" "$r" "$N" "$BYTES" "$c0" "$c1" >> "$OUT/rates.jsonl"
		rm -rf "${DIRS[$t]}/r$r" "${DIRS[$t]}/t$r"
	done
done
mkdir -p "$OUT/logs" && cp "$WORK"/s/logs/*.log "$OUT/logs/" # (kept: a slow round can be looked into)
"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null
[ "$COUNT" = 1 ] || exit 0

# round trips per operation, on a cluster that counts them
# shellcheck disable=SC2086
"$BIN" cluster up --dir "$WORK/c" --mount "$WORK/cm" --mem 4G --ssd 0 --pfs none --fwds 1 --pprof-base "$BASE" \
	--mount-flags --debug $UPFLAGS >/dev/null
python3 - "$WORK/c" "$WORK/cm" "$BASE" "$COUNTN" "$BYTES" "$OUT/counts.json" <<'PY'
import collections, glob, json, os, re, subprocess, sys, time, urllib.request
state, mnt, base, n, nbytes, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
daemons = [d["Name"] for d in json.load(open(state + "/cluster.json"))["Daemons"]]
log = [p for p in glob.glob(state + "/logs/*") if "mount" in os.path.basename(p)][0]
series = {"fwd": "sluice_fwd_requests_total", "meta": "sluice_meta_requests_total", "data": "sluice_data_requests_total"}

def counters():
    c = collections.Counter()
    for i, name in enumerate(daemons):
        kind = "fwd" if name.startswith("fwd") else "data" if name.startswith("data") else name
        if kind not in series and kind != "mount":
            continue
        for l in urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (base + i)).read().decode().splitlines():
            if kind == "mount":
                # opens and reads of owned files the mount answered itself
                if l.startswith("sluice_client_owned_answers_total "):
                    c["mount:owned"] += float(l.rsplit(" ", 1)[1])
            elif l.startswith(series[kind] + "{"):
                op = re.search(r'op="([^"]*)"', l).group(1)
                c[kind + ":" + op] += float(l.rsplit(" ", 1)[1])
    rx = collections.Counter(m.group(1) for m in re.finditer(r"rx \d+: (\w+)", open(log, errors="replace").read()))
    for op, v in rx.items():
        c["fuse:" + op] += v
    return c

def run(phases, d, extra=()):
    subprocess.run(["bin/mdtest", "-n", str(n), "-bytes", nbytes, "-phases", phases, *extra, d], check=True, capture_output=True)

res = {}
d = mnt + "/count"
steps = [(p, p, ()) for p in ["create", "stat", "read", "unlink", "mkdir", "rmdir"]]
steps += [("tree-create", "tree-create", ("-depth", "2", "-branch", "22")), ("tree-remove", "tree-remove", ("-depth", "2", "-branch", "22"))]
os.makedirs(d, exist_ok=True)
for name, phases, extra in steps:
    time.sleep(1.5)  # batched creates, size reports and settlements of the step before
    c0 = counters()
    run(phases, d if not name.startswith("tree") else mnt + "/ctree", extra)
    time.sleep(1.5)
    c1 = counters()
    ops = n if not name.startswith("tree") else 1 + 22 + 22 * 22
    res[name] = {k: round((c1[k] - c0[k]) / ops, 2) for k in sorted(c1) if c1[k] - c0[k] > 0}
json.dump(res, open(out, "w"), indent=1)
PY
bench_stamp "$OUT/rates.jsonl"
python3 bench/smallfiles/report.py "$OUT"
