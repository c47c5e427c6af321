#!/usr/bin/env bash
# The data-path comparison: the same fio and metadata workloads, in one run,
# against raw tmpfs, the root disk, a go-fuse passthrough mount (direct I/O,
# kernel passthrough off), GlusterFS (one brick on tmpfs over loopback) and
# sluice (client, forwarding daemon and mem data server as separate processes
# over TCP), once more with Beacon's monitoring off. Prints a table of
# absolute figures and of sluice's ratios to the passthrough baseline, to
# GlusterFS and to itself without monitoring.
#
#   bash bench/run.sh            # full run: 2 GiB per workload (installs
#                                # glusterfs-server from apt if missing)
#   SMOKE=1 bash bench/run.sh    # small sizes, checks the harness; no GlusterFS
#   GLUSTER=0 bash bench/run.sh  # full run without GlusterFS
#   CACHE=0 bash bench/run.sh    # without the sluice-nocache target (the mount's
#                                # block cache off, --read-cache 0; on by default)
#   HUGE_BASE=1 bash bench/run.sh   # the tmpfs, passthrough and GlusterFS targets on a tmpfs
#                                # with large folios (huge=within_size), as sluice cluster up gives
#                                # its mem tier when run as root (cluster/memfs.go)
#   HOLD_PAGES=1 bash bench/run.sh  # the guest keeps the memory freed during the run
#                                # (new files do not measure the host's page faults:
#                                # bench/holdpages.sh)
#
# Results are also written as JSON lines to $OUT (default bench/results.jsonl).
set -euo pipefail
# a kill of this script, kill -9 too, takes its clusters down and removes
# their state (sluice cluster up --exit-with, --exit-remove), and the passthrough
# baseline's mount (bench/passthrough.sh)
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
	SIZE=${SIZE:-64m}; RSIZE=${RSIZE:-16m}; MDN=${MDN:-500}; CKPT=${CKPT:-32m}; RUNTIME=${RUNTIME:-2}
else
	SIZE=${SIZE:-2g}; RSIZE=${RSIZE:-256m}; MDN=${MDN:-20000}; CKPT=${CKPT:-256m}; RUNTIME=${RUNTIME:-15}
fi
OUT=${OUT:-bench/results.jsonl}
if [ "$SMOKE" = 1 ]; then GLUSTER=${GLUSTER:-0}; else GLUSTER=${GLUSTER:-1}; fi
if [ "$SMOKE" = 1 ]; then CACHE=${CACHE:-0}; else CACHE=${CACHE:-1}; fi
GVOL=sluicebench$$
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
WORK=$(mktemp -d /tmp/sluice-bench.XXXXXX)
SHM=$(mktemp -d /dev/shm/sluice-bench.XXXXXX)
[ -z "${HUGE_BASE:-}" ] || huge_tmpfs "$SHM"
BIN=$(bench_sluice)
bench_tool mdtest >/dev/null
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)"; exit 1; }

# shellcheck source=bench/passthrough.sh
. bench/passthrough.sh
cleanup() {
	set +e
	release_pages
	"$BIN" cluster down --dir "$WORK/sluice-state" --purge >/dev/null 2>&1
	"$BIN" cluster down --dir "$WORK/nomon-state" --purge >/dev/null 2>&1
	"$BIN" cluster down --dir "$WORK/nocache-state" --purge >/dev/null 2>&1
	stop_passthrough "$WORK/pt"
	if [ "$GLUSTER" = 1 ]; then
		umount -l "$WORK/gluster" 2>/dev/null
		timeout 30 gluster --mode=script volume stop "$GVOL" force >/dev/null 2>&1
		timeout 30 gluster --mode=script volume delete "$GVOL" >/dev/null 2>&1
		if [ -n "${GLUSTERD_STARTED:-}" ]; then
			pkill -x glusterfsd; pkill -x glusterd
			# gone before the next run starts its own (a glusterd still
			# exiting made the next one fail to start, silently)
			for _ in $(seq 100); do pgrep -x glusterd >/dev/null || pgrep -x glusterfsd >/dev/null || break; sleep 0.1; done
		fi
	fi
	unmount_tmpfs "$SHM"
	rm -rf "$WORK" "$SHM" 2>/dev/null
}
trap cleanup EXIT

# targets: name → directory
declare -A DIRS
mkdir -p "$SHM/tmpfs" "$WORK/disk"
hold_pages "$SHM"
DIRS[tmpfs]=$SHM/tmpfs
DIRS[disk]=$WORK/disk
start_passthrough "$WORK/pt" "$SHM/pt-orig"
DIRS[passthrough]=$WORK/pt
TARGETS=(tmpfs disk passthrough)
if [ "$GLUSTER" = 1 ]; then
	# GlusterFS 10, one brick on tmpfs; it refuses 127.0.0.1 as a brick host
	# but takes 127.0.0.2, so all traffic stays on loopback
	if ! command -v glusterd >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq glusterfs-server >/dev/null
	fi
	if ! pgrep -x glusterd >/dev/null; then
		glusterd --log-level=WARNING || { echo "glusterd did not start (its log: /var/log/glusterfs/glusterd.log)" >&2; exit 1; }
		GLUSTERD_STARTED=1
		sleep 2
	fi
	mkdir -p "$SHM/brick" "$WORK/gluster"
	gluster --mode=script volume create "$GVOL" 127.0.0.2:"$SHM/brick" force >/dev/null
	gluster --mode=script volume start "$GVOL" >/dev/null
	mount -t glusterfs 127.0.0.2:/"$GVOL" "$WORK/gluster"
	DIRS[gluster]=$WORK/gluster
	TARGETS+=(gluster)
fi
"$BIN" cluster up --dir "$WORK/sluice-state" --mount "$WORK/sluice" --mem 8G --ssd 0 --pfs none >/dev/null
DIRS[sluice]=$WORK/sluice
TARGETS+=(sluice)
# the same with Beacon's per-operation monitoring off, for its overhead
"$BIN" cluster up --dir "$WORK/nomon-state" --mount "$WORK/nomon" --mem 8G --ssd 0 --pfs none --monitor=false >/dev/null
DIRS[sluice-nomon]=$WORK/nomon
TARGETS+=(sluice-nomon)
if [ "$CACHE" = 1 ]; then
	# the same without the mount's block cache for small reads (on by
	# default since 2026-11-26)
	"$BIN" cluster up --dir "$WORK/nocache-state" --mount "$WORK/nocache" --mem 8G --ssd 0 --pfs none \
		--mount-flags=--read-cache=0 >/dev/null
	DIRS[sluice-nocache]=$WORK/nocache
	TARGETS+=(sluice-nocache)
fi

: > "$WORK/results.jsonl"
fiojob() { # target name args...
	local target=$1 name=$2; shift 2
	local dir=${DIRS[$target]}/fio-$name
	mkdir -p "$dir"
	fio --name="$name" --directory="$dir" --ioengine=psync --direct=1 --iomem_align=4096 \
		--group_reporting --output-format=json "$@" > "$WORK/fio.json"
	python3 bench/report.py fio "$target" "$name" "$WORK/fio.json" >> "$WORK/results.jsonl"
	rm -rf "$dir"
}

for t in "${TARGETS[@]}"; do
	for j in 1 2; do
		# warm-up pass, then the measured sequential write and read
		fiojob "$t" warm$j --rw=write --bs=1m --size=$RSIZE --numjobs=$j >/dev/null 2>&1 || true
		fiojob "$t" seqwrite-$j --rw=write --bs=1m --size=$SIZE --numjobs=$j --end_fsync=1 --create_on_open=1 --unlink=0
		mkdir -p "${DIRS[$t]}/fio-seqread-$j"
		fio --name=seqread-$j --directory="${DIRS[$t]}/fio-seqread-$j" --rw=write --bs=1m --size=$SIZE \
			--numjobs=$j --direct=1 --ioengine=psync --output-format=json >/dev/null
		fiojob "$t" seqread-$j --rw=read --bs=1m --size=$SIZE --numjobs=$j
	done
	mkdir -p "${DIRS[$t]}/fio-randread"
	fio --name=randread --directory="${DIRS[$t]}/fio-randread" --rw=write --bs=1m --size=$RSIZE --direct=1 \
		--ioengine=psync --output-format=json >/dev/null
	fiojob "$t" randread --rw=randread --bs=4k --size=$RSIZE --time_based --runtime=$RUNTIME
	# checkpoint: N processes each write a file, then read it back
	fiojob "$t" ckpt-write --rw=write --bs=1m --size=$CKPT --numjobs=4 --end_fsync=1 --unlink=0
	mkdir -p "${DIRS[$t]}/fio-ckpt-read"
	fio --name=ckpt-read --directory="${DIRS[$t]}/fio-ckpt-read" --rw=write --bs=1m --size=$CKPT --numjobs=4 \
		--direct=1 --ioengine=psync --output-format=json >/dev/null
	fiojob "$t" ckpt-read --rw=read --bs=1m --size=$CKPT --numjobs=4
	# metadata: one process in one directory, then two in two directories
	bin/mdtest -n "$MDN" "${DIRS[$t]}/md1" | python3 bench/report.py md "$t" md-1proc >> "$WORK/results.jsonl"
	( bin/mdtest -n "$MDN" "${DIRS[$t]}/md2a" > "$WORK/md2a" & bin/mdtest -n "$MDN" "${DIRS[$t]}/md2b" > "$WORK/md2b"; wait )
	cat "$WORK/md2a" "$WORK/md2b" | python3 bench/report.py md2 "$t" md-2proc >> "$WORK/results.jsonl"
done

python3 bench/report.py table "$WORK/results.jsonl"
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
