#!/usr/bin/env bash
# Streams and CPU per byte (issue 18, goals 1 and 2; docs/benchmarks.md):
# N parallel streams of sequential 1 MiB direct I/O, one file per stream,
# against the go-fuse passthrough over tmpfs (bench/passthrough) and
# `sluice cluster up` (mem tier), side by side in interleaved rounds (the order of
# the two alternates by round). Each case writes new files (fsync at the
# end), overwrites them, reads them, then removes them. Beside each
# phase's MB/s it records the CPU seconds (user + system, /proc) every
# process on the path spent: each sluice daemon and the mount, or the
# passthrough daemon.
#
#   bash bench/streams.sh                          # 3 rounds of 1, 2, 4 streams, 1 GiB each: ~15 min
#   ROUNDS=1 STREAMS="1 4" SIZE=256m bash bench/streams.sh
#   UP="--monitor=false" bash bench/streams.sh      # extra `sluice cluster up` flags
#   SLUICE_BIN=/tmp/sluice-old bash bench/streams.sh  # another build (e.g. the previous commit's)
#   PROFILE=4 bash bench/streams.sh                # also CPU, mutex and block profiles of every
#                                                  # daemon during 4-stream writes and reads (PROFDIR)
#   HOLD_PAGES=1 bash bench/streams.sh             # memory freed stays the guest's during the run
#   PT_HUGE=1 bash bench/streams.sh                # the passthrough over a tmpfs with large folios
#                                                  # (huge=within_size), as sluice cluster up's mem tier as root
#   python3 bench/streams.py bench/results/streams.jsonl   # the tables
#
# HOLD_PAGES=1: the guest keeps the memory freed during the run instead of
# handing it to the host, so new files do not measure the host's page
# faults (bench/holdpages.sh). The results say so ("pages": "held").
#
# Results: one JSON line per phase in $OUT (default bench/results/streams.jsonl).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3}
STREAMS=${STREAMS:-1 2 4}
SIZE=${SIZE:-1g}
OUT=${OUT:-bench/results/streams.jsonl}
PROFILE=${PROFILE:-}
PROFDIR=${PROFDIR:-/tmp/sluice-streams-prof}
BASE=${BASE:-$((21000 + RANDOM % 200 * 10))}
UP=${UP:-}
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
# what the results are labelled with: the flags, and the build if not this one
LABEL=$UP${SLUICE_BIN:+ bin=$SLUICE_BIN}${PT_HUGE:+ pt=huge}
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
BIN=$(bench_sluice)
# shellcheck source=bench/passthrough.sh
. bench/passthrough.sh
stop_pt() {
	stop_passthrough "$WORK/pt"
	unmount_tmpfs "$SHM/pt"
}
ON_EXIT=stop_pt
bench_dirs streams
mkdir -p "$(dirname "$OUT")"
hold_pages "$SHM"
LAST_REP=$(reported_kib)
[ -z "${PT_HUGE:-}" ] || huge_tmpfs "$SHM/pt"
start_passthrough "$WORK/pt" "$SHM/pt"
PPROF=()
[ -n "$PROFILE" ] && PPROF=(--pprof-base "$BASE")
# shellcheck disable=SC2086
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 12G --ssd 0 --pfs none "${PPROF[@]}" $UP >/dev/null
pids() { # target: name=pid ...
	if [ "$1" = passthrough ]; then
		echo "passthrough=$PT"
	else
		python3 -c 'import json,sys; print(" ".join("%s=%s" % (d["Name"], d["Pid"]) for d in json.load(open(sys.argv[1]))["Daemons"]))' "$WORK/s/cluster.json"
	fi
}
cpu() { # name=pid... → name=seconds (user+system)/seconds (system)...
	python3 - "$@" <<'PY'
import sys
sys.path.insert(0, "bench")
from proc import cpu_seconds
out = []
for a in sys.argv[1:]:
    n, p = a.split("=")
    out.append("%s=%s/%s" % ((n,) + cpu_seconds(p)))  # user+system/system
print(" ".join(out))
PY
}
profile() { # label: 8 s CPU, mutex and block profiles of every daemon
	local names n i=0 pids=()
	names=$(python3 -c 'import json,sys; print(" ".join(d["Name"] for d in json.load(open(sys.argv[1]))["Daemons"]))' "$WORK/s/cluster.json")
	mkdir -p "$PROFDIR/$1"
	for n in $names; do
		local u="http://127.0.0.1:$((BASE + i))/debug/pprof"
		curl -s -o "$PROFDIR/$1/$n.cpu.pb.gz" "$u/profile?seconds=8" &
		pids+=($!)
		curl -s -o "$PROFDIR/$1/$n.mutex.pb.gz" "$u/mutex?seconds=8" &
		pids+=($!)
		curl -s -o "$PROFDIR/$1/$n.block.pb.gz" "$u/block?seconds=8" &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}" # not the passthrough, which runs on
}
phase() { # target round streams phase rw dir
	local target=$1 round=$2 n=$3 ph=$4 rw=$5 dir=$6 p a b f=$WORK/fio.json
	p=$(pids "$target")
	local rep0 rep1 k0 k1
	rep0=$(reported_kib)
	k0=$(kernel_counts)
	# shellcheck disable=SC2086
	a=$(cpu $p)
	local extra=()
	[ "$rw" = write ] && extra=(--end_fsync=1)
	local prof=
	if [ -n "$PROFILE" ] && [ "$target" = sluice ] && [ "$n" = "$PROFILE" ] && [ "$round" = 1 ] && [ "$ph" != overwrite ]; then
		# a longer phase, profiled in its middle
		extra+=(--time_based --runtime=14)
		prof=$ph
	fi
	fio --name=s --directory="$dir" --rw="$rw" --bs=1M --size="$SIZE" --numjobs="$n" --direct=1 \
		--iomem_align=4096 --ioengine=psync --group_reporting --output-format=json "${extra[@]}" > "$f" &
	local fp=$!
	if [ -n "$prof" ]; then sleep 3; profile "$prof-$n"; fi
	wait $fp
	# shellcheck disable=SC2086
	b=$(cpu $p)
	rep1=$(reported_kib)
	k1=$(kernel_counts)
	python3 - "$target" "$round" "$n" "$ph" "$f" "$a" "$b" "$LABEL" "$prof" "$PAGES" "$((rep0 - LAST_REP))" "$((rep1 - rep0))" "$k0" "$k1" >> "$OUT" <<'PY'
import json, sys
target, rnd, n, ph, path, a, b, up, prof, pages, rep_before, rep_during, k0, k1 = sys.argv[1:]
k0, k1 = json.loads(k0), json.loads(k1)
j = json.load(open(path))["jobs"][0]
io = j["read"] if ph == "read" else j["write"]
cpu0 = dict(x.split("=") for x in a.split())
cpu1 = dict(x.split("=") for x in b.split())
sys0 = {k: float(v.split("/")[1]) for k, v in cpu0.items()}
sys1 = {k: float(v.split("/")[1]) for k, v in cpu1.items()}
cpu0 = {k: v.split("/")[0] for k, v in cpu0.items()}
cpu1 = {k: v.split("/")[0] for k, v in cpu1.items()}
print(json.dumps({"target": target, "round": int(rnd), "streams": int(n), "phase": ph,
                  "mbps": io["bw_bytes"] / 1e6, "bytes": io["io_bytes"], "up": up, "profiled": bool(prof), "pages": pages,
                  # MiB of freed memory the guest handed to the host since the
                  # phase before ended, and during this one (bench/holdpages.sh)
                  "reported_mib": [int(rep_before) >> 10, int(rep_during) >> 10],
                  # the kernel's counters over the phase, system-wide: page
                  # faults, compaction, tmpfs folios allocated by size (KiB)
                  "kernel": {k: k1[k] - k0[k] for k in k0 if k1[k] != k0[k]},
                  "cpu_s": {k: round(float(cpu1[k]) - float(cpu0[k]), 3) for k in cpu0},
                  "sys_s": {k: round(sys1[k] - sys0[k], 3) for k in sys0}}))  # the system part of cpu_s
PY
	LAST_REP=$rep1
}
kernel_counts() { # JSON: the /proc/vmstat and tmpfs large-folio counters phase() reports
	python3 - <<'PY'
import glob, json, os
out = {}
for line in open("/proc/vmstat"):
    k, v = line.split()
    if k in ("pgfault", "compact_stall", "compact_migrate_scanned", "thp_file_alloc", "thp_file_fallback"):
        out[k] = int(v)
for d in glob.glob("/sys/kernel/mm/transparent_hugepage/hugepages-*kB"):
    try:
        out["shmem_" + d.rsplit("-", 1)[1]] = int(open(d + "/stats/shmem_alloc").read())
    except OSError:
        pass
print(json.dumps(out))
PY
}
case1() { # target round streams
	local target=$1 dir
	if [ "$target" = passthrough ]; then dir=$WORK/pt/st; else dir=$WORK/m/st; fi
	mkdir -p "$dir"
	phase "$target" "$2" "$3" new write "$dir"
	phase "$target" "$2" "$3" overwrite write "$dir"
	phase "$target" "$2" "$3" read read "$dir"
	rm -rf "$dir"
	sleep 1 # removals reach the data servers
}
# warm both up (first writes into fresh tmpfs pages, the daemons' pools)
for t in passthrough sluice; do
	d=$([ $t = passthrough ] && echo "$WORK/pt/warm" || echo "$WORK/m/warm")
	mkdir -p "$d"
	fio --name=w --directory="$d" --rw=write --bs=1M --size=256m --direct=1 --ioengine=psync >/dev/null
	rm -rf "$d"
done
for r in $(seq "$ROUNDS"); do
	for n in $STREAMS; do
		if [ $((r % 2)) = 1 ]; then order="sluice passthrough"; else order="passthrough sluice"; fi
		for t in $order; do
			case1 "$t" "$r" "$n"
		done
	done
done
bench_stamp "$OUT"
python3 bench/streams.py "$OUT"
[ -n "$PROFILE" ] && echo "profiles: $PROFDIR (go tool pprof -top $BIN FILE)"
exit 0
