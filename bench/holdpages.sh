# shellcheck shell=bash
# Sourced by the benchmark scripts (bench/streams.sh, bench/run.sh,
# bench/remote4k.sh): with HOLD_PAGES=1, keep the memory freed during a run
# in the guest.
#
# On this VM the guest hands freed memory back to the host (free page
# reporting) and the first touch of such a page faults on the host:
# writing new tmpfs pages then runs at ~0.5 GB/s instead of ~3, and
# whichever process allocates them (a data server, the passthrough, a
# GlusterFS brick) pays it, more or less by chance of what was freed
# when. hold_pages touches PREFAULT MiB of tmpfs once and has the guest
# keep freed pages for 300 s (HOLD_MS; the module refuses more) whatever
# their amount (64 GiB; 16 until 2026-11-28) before it reports them.
# With 100 s, as until 2026-11-27, the harness's first sluice target
# wrote its two-job sequential files (bench/run.sh seqwrite-2, ~4 min
# into a run) at 0.57-0.89 of its own warm-up pass just before, in 9 of
# 9 runs, where the two sluice targets after it (monitoring off, block
# cache off) did not: consistent with pages freed by the targets before
# it and reported meanwhile (the module's reported_kib grew by 5.7 GiB
# in the first minutes of a run); with 300 s, 0.90-1.07
# (/sys/module/page_reporting/parameters/min_free_ms and max_waiting_mib);
# release_pages (call it from the script's exit trap) restores both. New
# files then measure the software, not the hypervisor
# (docs/benchmarks.md, "Monitoring's cost, re-measured…").

HOLD_PAGES=${HOLD_PAGES:-}
PREFAULT=${PREFAULT:-10240} # MiB
PAGES= # "held" once hold_pages has run: the scripts label their results with it
_HOLD_DIR=/sys/module/page_reporting/parameters
_HOLD_FREE='' _HOLD_WAIT=''

hold_pages() { # dir on tmpfs to prefault in
	[ -n "$HOLD_PAGES" ] || return 0
	[ -w "$_HOLD_DIR/min_free_ms" ] || { echo "HOLD_PAGES: $_HOLD_DIR/min_free_ms is not there or not writable" >&2; return 1; }
	_HOLD_FREE=$(cat "$_HOLD_DIR/min_free_ms")
	echo "${HOLD_MS:-300000}" > "$_HOLD_DIR/min_free_ms"
	if [ -w "$_HOLD_DIR/max_waiting_mib" ]; then # the default reports once 1 GiB waits
		_HOLD_WAIT=$(cat "$_HOLD_DIR/max_waiting_mib")
		echo 65536 > "$_HOLD_DIR/max_waiting_mib"
	fi
	dd if=/dev/zero of="$1/prefault" bs=1M count="$PREFAULT" status=none
	rm -f "$1/prefault"
	# shellcheck disable=SC2034 # read by the scripts that source this
	PAGES=held
}

# reported_kib: KiB of freed memory the guest has handed to the host since
# boot (0 where the module is not there)
reported_kib() {
	cat "$_HOLD_DIR/reported_kib" 2>/dev/null || echo 0
}

release_pages() {
	if [ -n "$_HOLD_FREE" ]; then echo "$_HOLD_FREE" > "$_HOLD_DIR/min_free_ms"; fi
	if [ -n "$_HOLD_WAIT" ]; then echo "$_HOLD_WAIT" > "$_HOLD_DIR/max_waiting_mib"; fi
	return 0
}

# huge_tmpfs mounts a tmpfs with large folios on dir, as `sluice cluster up` gives
# its mem tier when run as root (cluster/memfs.go, memFSOptions), for a
# baseline on the same medium; unmount_tmpfs undoes it (from a cleanup:
# no error where nothing is mounted).
huge_tmpfs() { # dir
	mkdir -p "$1"
	mount -t tmpfs -o huge=within_size,mode=0700 tmpfs "$1"
}
unmount_tmpfs() { # dir
	if mountpoint -q "$1"; then umount -l "$1"; fi
}

# bench_dirs NAME: a benchmark's scratch directories, WORK under /tmp (a
# local cluster's state in $WORK/s) and SHM under /dev/shm (hold_pages's
# prefault), and an exit trap that runs the script's own ON_EXIT (if
# set), releases the pages, takes the cluster in $WORK/s down
# (${BIN:-bin/sluice}) and removes both.
bench_dirs() { # name
	WORK=$(mktemp -d "/tmp/sluice-$1.XXXXXX")
	SHM=$(mktemp -d "/dev/shm/sluice-$1.XXXXXX")
	trap _bench_exit EXIT
}
_bench_exit() {
	set +e
	if [ -n "${ON_EXIT:-}" ]; then "$ON_EXIT"; fi
	release_pages
	"${BIN:-bin/sluice}" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1
	rm -rf "$WORK" "$SHM"
}
