#!/usr/bin/env bash
# The mount's memory after R rounds of 10,000 small creates (docs/benchmarks.md,
# "Small files past the owned budget"): its RSS after each round and the
# top of its heap profile at the end. A look, not a benchmark.
#   R=4 bash bench/smallfiles/mountheap.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
BASE=23500
W=$(mktemp -d /tmp/sluice-mh.XXXXXX)
trap 'bin/sluice cluster down --dir "$W/s" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
go build -o bin/sluice ./cmd/sluice; go build -o bin/mdtest ./bench/mdtest
bin/sluice cluster up --pprof-base $BASE --dir "$W/s" --mem 4G --ssd 0 --pfs none --mount "$W/m" >/dev/null
MI=$(python3 -c "import json;ds=json.load(open('$W/s/cluster.json'))['Daemons'];print([i for i,d in enumerate(ds) if d['Name'].startswith('mount')][0])")
PID=$(python3 -c "import json;ds=json.load(open('$W/s/cluster.json'))['Daemons'];print([d['Pid'] for d in ds if d['Name'].startswith('mount')][0])")
for r in $(seq 1 ${R:-4}); do
  mkdir "$W/m/r$r"; bin/mdtest -n 10000 -bytes 4096 -phases create "$W/m/r$r" | head -1
  grep VmRSS /proc/$PID/status
done
curl -s "http://127.0.0.1:$((BASE+MI))/debug/pprof/heap" > "$W/mount.heap"
go tool pprof -sample_index=inuse_space -top -nodecount=25 bin/sluice "$W/mount.heap" 2>/dev/null | head -35
curl -s "http://127.0.0.1:$((BASE+MI))/debug/pprof/heap?debug=1" | grep -E "^# (HeapAlloc|HeapSys|HeapIdle|HeapInuse|HeapReleased|Sys|NextGC|Stack|MSpan)" 
