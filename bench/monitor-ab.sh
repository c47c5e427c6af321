#!/usr/bin/env bash
# Beacon's overhead, A/B: two local clusters up at once, one with monitoring
# and one without. Each round runs, on both (order alternating), bench/mdtest
# (create, stat, unlink of N files) and fio sequential 1 MiB write
# (end_fsync) and read of SIZE; medians over the rounds and the ratios
# monitored/unmonitored are printed (docs/benchmarks.md). Interleaving
# cancels most of this VM's drift, which is larger than the effect; the
# last line, the CPU all daemons of a cluster used per metadata operation
# (bench/daemoncpu.py, including the once-a-second shipping of records),
# is the steadiest measure of what monitoring costs.
#
#   bash bench/monitor-ab.sh [N [SIZE [ROUNDS]]]   # default 2000 files, 1g, 6
#   OUT=bench/results/monitor-ab.txt ...            # where the raw lines go (one per round and side)
set -euo pipefail
# a kill of this script, kill -9 too, takes its clusters down and removes
# their state (sluice cluster up --exit-with, --exit-remove)
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
cd "$(dirname "$0")/.."
N=${1:-2000}
SIZE=${2:-1g}
ROUNDS=${3:-6}
OUT=${OUT:-bench/results/monitor-ab.txt}
mkdir -p "$(dirname "$OUT")"
command -v fio >/dev/null || { apt-get install -y -qq fio >/dev/null; }
go build -o bin/sluice ./cmd/sluice
go build -o bin/mdtest ./bench/mdtest
W=$(mktemp -d /tmp/sluice-ab.XXXXXX)
trap 'bin/sluice cluster down --dir $W/on --purge >/dev/null 2>&1; bin/sluice cluster down --dir $W/off --purge >/dev/null 2>&1; rm -rf $W' EXIT
bin/sluice cluster up --dir "$W/on" --mount "$W/mon" --mem 4G --ssd 0 --pfs none >/dev/null
bin/sluice cluster up --dir "$W/off" --mount "$W/moff" --mem 4G --ssd 0 --pfs none --monitor=false >/dev/null

seq1m() { # mount rw → MB/s
	fio --name=ab --filename="$1/seq" --rw="$2" --bs=1M --size="$SIZE" --direct=1 --iomem_align=4096 \
		--ioengine=psync --end_fsync=1 --output-format=json 2>/dev/null |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(round((j["write"]["bw_bytes"]+j["read"]["bw_bytes"])/1e6))'
}
for i in $(seq "$ROUNDS"); do
	order="mon moff"
	[ $((i % 2)) = 0 ] && order="moff mon"
	for m in $order; do
		state=$W/on
		[ "$m" = moff ] && state=$W/off
		c0=$(python3 bench/daemoncpu.py "$state/cluster.json")
		md=$(bin/mdtest -n "$N" "$W/$m/r$i")
		sleep 1.2 # the records' shipping and storing, once a second
		c1=$(python3 bench/daemoncpu.py "$state/cluster.json")
		mdcpu=$(python3 -c "print(round(($c1 - $c0) * 1e6 / (3 * $N), 1))")
		w=$(seq1m "$W/$m" write)
		r=$(seq1m "$W/$m" read)
		rm -f "$W/$m/seq"
		echo "$m $md seqwrite $w seqread $r mdcpu $mdcpu"
	done
done | tee "$OUT" | python3 -c '
import sys, statistics as st
runs = {}
for line in sys.stdin:
    f = line.split()
    runs.setdefault(f[0], []).append([float(x) for x in f[2::2]])
names = ("creates/s", "stats/s", "unlinks/s", "seqwrite MB/s", "seqread MB/s", "daemon CPU us/md op")
med = {m: [st.median(col) for col in zip(*runs[m])] for m in runs}
lo = {m: [min(col) for col in zip(*runs[m])] for m in runs}
hi = {m: [max(col) for col in zip(*runs[m])] for m in runs}
print("%-22s %22s %22s %8s" % ("median (min-max) of %d" % len(runs["mon"]), "monitored", "unmonitored", "ratio"))
for k, name in enumerate(names):
    a, b = med["mon"][k], med["moff"][k]
    r = lambda m: "%.0f (%.0f-%.0f)" % (med[m][k], lo[m][k], hi[m][k])
    print("%-22s %22s %22s %8.3f" % (name, r("mon"), r("moff"), a / b))
'
