#!/usr/bin/env bash
# The node-local experiment (docs/nodelocal.md): an mdtest-like storm of
# N-N creates, stats and unlinks (`sluice workload --kind meta`: each rank
# creates OPS files, stats them, lists its directory, removes them) from
# RANKS ranks on 8 emulated compute nodes, in four layouts:
#   shared     one directory for every rank, in the metadata service
#   global     one directory per rank, in the metadata service
#              (both with the mount's write-back creates off: every create
#              and unlink is a request of the metadata service, as when the
#              ranks' nodes are separate mounts contending for a directory)
#   global-wb  the same with write-back creates on (sluice's default: one
#              mount holds each rank directory's delegation and sends its
#              creates in batches)
#   private-S  one private directory per rank in a node-local directory,
#              on S = 1, 2, 4 data servers (each name hashed to one)
# Every server is given the same capacity, CAP namespace operations per
# second (`sluice meta --max-ops CAP`, `--data-max-iops CAP`): one
# metadata server against S data servers, the resource node-local mode
# spreads. CAP=0 runs the same uncapped (this 2-core machine's CPU is the
# limit then). Each case RUNS times; the metadata service's namespace
# requests during each run are recorded (private runs make about four per
# rank, whatever the operations: getattrs of the local-mode directory,
# whose attributes each rank's private directory's mkdir and rmdir change).
# Then per-rank bandwidth: 4 ranks writing and reading 128 MiB each in
# their private directories against the same workload in the data
# server's own directory (tmpfs) reached directly.
#
#   bash bench/nodelocal/run.sh               # 3 runs, CAP=500 and CAP=0, ~6 min
#   SMOKE=1 bash bench/nodelocal/run.sh       # 1 run, small, figures checked
#
# Raw results: bench/nodelocal/results.jsonl (OUT); table: report.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} RANKS=${RANKS:-16} OPS=${OPS:-200} CAPS=${CAPS:-500 0} SERVERS=${SERVERS:-1 2 4}
BW=${BW:-128M} OUT=${OUT:-bench/nodelocal/results.jsonl}
if [ "$SMOKE" = 1 ]; then
	RUNS=1 OPS=40 CAPS=500 SERVERS="1 4" BW=16M
fi
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d /tmp/sluice-nodelocal.XXXXXX)
cleanup() {
	[ "${KEEP:-0}" = 1 ] && return
	$S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
NODES=cn0,cn1,cn2,cn3,cn4,cn5,cn6,cn7
MPORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
metaops() {
	python3 - "$MPORT" <<'EOF'
import sys, urllib.request
ns = {"lookup", "getattr", "setattr", "mknod", "mkdir", "unlink", "rmdir", "rename", "link", "symlink",
      "readlink", "readdir", "open", "release", "layout", "alloc", "extend", "create-batch", "delegate"}
t = 0
for l in urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode().splitlines():
    if l.startswith("sluice_meta_requests_total{"):
        op = l.split('op="')[1].split('"')[0]
        if op in ns:
            t += float(l.rsplit(" ", 1)[1])
print(int(t))
EOF
}
up() { # servers cap [mount flags]
	local iops=()
	[ "$2" != 0 ] && iops=(--data-max-iops "$2")
	$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem 1G --mem-servers "$1" --ssd 0 --fwds 2 "${iops[@]}" \
		--meta-flags "--max-ops $2 --metrics 127.0.0.1:$MPORT" --mount-flags "${3:-}" >/dev/null
}
down() {
	$S cluster down --dir "$WORK/state" --purge >/dev/null
	rm -rf "$WORK/state"
}
record() { # layout servers cap run
	python3 - "$@" "$WORK/job.json" "$m0" "$m1" >> "$WORK/results.jsonl" <<'EOF'
import json, sys
layout, servers, cap, run, path, m0, m1 = sys.argv[1:8]
j = json.load(open(path))
span = j["Span"] / 1e9
print(json.dumps({"layout": layout, "servers": int(servers), "cap": float(cap), "run": int(run), "ranks": j["Ranks"],
                  "ops": j["Ops"], "bytes": j["Bytes"], "span": span, "ops_per_s": j["Ops"] / span, "mbps": j["Bytes"] / span / 1e6,
                  "slowest": j["Slowest"] / 1e9, "meta_ops": int(m1) - int(m0)}))
EOF
	tail -1 "$WORK/results.jsonl" | python3 -c "import json,sys; r=json.load(sys.stdin); print('%-10s S=%d cap=%-4g run %d: %7.0f ops/s %7.1f MB/s, %d metadata-service requests' % (r['layout'], r['servers'], r['cap'], r['run'], r['ops_per_s'], r['mbps'], r['meta_ops']))"
}
storm() { # layout dir [flags]
	local dir=$2 # $1, the layout, names the run in record
	shift 2
	mkdir -p "$dir"
	m0=$(metaops)
	$S workload --kind meta --ranks "$RANKS" --nodes "$NODES" --ops "$OPS" --json "$@" "$dir" > "$WORK/job.json"
	m1=$(metaops)
}
: > "$WORK/results.jsonl"
for run in $(seq 1 "$RUNS"); do
	for cap in $CAPS; do
		up 1 "$cap" "--writeback-creates=false"
		storm shared "$WORK/mnt/shared" --shared-dir
		record shared 1 "$cap" "$run"
		storm global "$WORK/mnt/global"
		record global 1 "$cap" "$run"
		down
		up 1 "$cap"
		storm global-wb "$WORK/mnt/global"
		record global-wb 1 "$cap" "$run"
		down
		for s in $SERVERS; do
			up "$s" "$cap"
			mkdir "$WORK/mnt/L"
			$S file stripe --dir "$WORK/state" --local "$WORK/mnt/L" >/dev/null
			storm private "$WORK/mnt/L"
			record private "$s" "$cap" "$run"
			down
		done
	done
	# per-rank bandwidth: private directories against the server's own
	# directory, one data server, uncapped
	up 1 0
	mkdir "$WORK/mnt/L"
	$S file stripe --dir "$WORK/state" --local "$WORK/mnt/L" >/dev/null
	m0=$(metaops)
	$S workload --kind nn --ranks 4 --size "$BW" --json "$WORK/mnt/L" > "$WORK/job.json"
	m1=$(metaops)
	record bw-private 1 0 "$run"
	# the data server's own directory: its --dir with -local (data/localns)
	direct=$(python3 -c "import json,sys; a=[d['Args'] for d in json.load(open(sys.argv[1]))['Daemons'] if d['Name']=='data-mem'][0]; print(a[a.index('--dir')+1] + '-local')" "$WORK/state/cluster.json")
	[ -d "$direct" ] || { echo "no data-server directory $direct" >&2; exit 1; }
	mkdir -p "$direct/direct"
	m0=$(metaops)
	$S workload --kind nn --ranks 4 --size "$BW" --json "$direct/direct" > "$WORK/job.json"
	m1=$(metaops)
	record bw-direct 1 0 "$run"
	rm -rf "$direct/direct"
	down
done
if [ "$SMOKE" = 1 ]; then
	python3 bench/nodelocal/report.py --check "$WORK/results.jsonl"
else
	bench_stamp "$WORK/results.jsonl"
	cat "$WORK/results.jsonl" >> "$OUT"
	python3 bench/nodelocal/report.py "$OUT"
fi
