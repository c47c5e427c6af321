# shellcheck shell=bash
# Sourced by the benchmark scripts: the go-fuse passthrough over tmpfs
# (bench/passthrough, direct I/O, kernel passthrough off), the baseline
# they measure sluice against.
#
#   start_passthrough MOUNTPOINT SOURCE_DIR   # builds bin/passthrough, mounts, waits for it (PT: its pid)
#   stop_passthrough                          # from the script's exit trap

PT=

start_passthrough() {
	bench_tool passthrough >/dev/null
	mkdir -p "$1" "$2"
	bin/passthrough "$1" "$2" &
	PT=$!
	# a kill of the script, kill -9 too, takes the mount down: a watcher
	# in a session of its own (out of the script's process group) waits
	# for the script ($SLUICE_EXIT_WITH, or this shell) to end, then
	# unmounts, which ends the passthrough too
	setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; umount -l "$2" 2>/dev/null' _ "${SLUICE_EXIT_WITH:-$$}" "$1" </dev/null >/dev/null 2>&1 &
	for _ in $(seq 100); do grep -q " $1 fuse" /proc/mounts && return 0; sleep 0.05; done
	echo "the passthrough did not mount on $1" >&2
	return 1
}

stop_passthrough() { # mountpoint
	if [ -n "$PT" ]; then kill "$PT" 2>/dev/null; wait "$PT" 2>/dev/null; fi
	umount -l "$1" 2>/dev/null
	return 0
}
