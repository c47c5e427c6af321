#!/usr/bin/env bash
# Beacon's metadata overhead, A/B: two local clusters up at once, one with
# monitoring and one without; bench/mdtest runs interleaved on both, six
# times each, and the medians are printed (docs/benchmarks.md).
#
#   bash bench/monitor-ab.sh [N]     # N files per run, default 2000
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
go build -o bin/sluice ./cmd/sluice
go build -o bin/mdtest ./bench/mdtest
W=$(mktemp -d /tmp/sluice-ab.XXXXXX)
trap 'bin/sluice down --dir $W/on --purge >/dev/null 2>&1; bin/sluice down --dir $W/off --purge >/dev/null 2>&1; rm -rf $W' EXIT
bin/sluice up --dir "$W/on" --mount "$W/mon" >/dev/null
bin/sluice up --dir "$W/off" --mount "$W/moff" --monitor=false >/dev/null
for i in 1 2 3 4 5 6; do
	for m in mon moff; do echo "$m $(bin/mdtest -n "$N" "$W/$m/r$i")"; done
done | python3 -c '
import sys, statistics as st
runs = {}
for line in sys.stdin:
    f = line.split()
    runs.setdefault(f[0], []).append([float(x) for x in f[2::2]])
for m in ("mon", "moff"):
    c, s, u = zip(*runs[m])
    print("%-5s median creates/s %6.0f  stats/s %6.0f  unlinks/s %6.0f" % (m, st.median(c), st.median(s), st.median(u)))
'
