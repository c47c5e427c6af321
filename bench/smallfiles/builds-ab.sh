#!/usr/bin/env bash
# Two builds of sluice side by side on mdtest's small-file phases
# (docs/benchmarks.md, "A small file's life in the service"): for each of
# ROUNDS rounds, each build in turn on a fresh `sluice cluster up` (mem tier),
# DIRS directories of N files of BYTES each (create, stat, read, unlink);
# one line per round and build.
#
#   bash bench/smallfiles/builds-ab.sh OLD_BINARY NEW_BINARY
#   e.g. git stash; go build -o /tmp/sluice-old ./cmd/sluice; git stash pop
#        go build -o /tmp/sluice-new ./cmd/sluice
#        bash bench/smallfiles/builds-ab.sh /tmp/sluice-old /tmp/sluice-new
set -euo pipefail
# a kill of this script, kill -9 too, takes its clusters down and removes
# their state (sluice cluster up --exit-with, --exit-remove)
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
cd "$(dirname "$0")/../.."
OLD=${1:?old binary} NEW=${2:?new binary}
ROUNDS=${ROUNDS:-3} DIRS=${DIRS:-3} N=${N:-3000} BYTES=${BYTES:-4096}
go build -o bin/mdtest ./bench/mdtest
WORK=$(mktemp -d /tmp/sluice-builds-ab.XXXXXX)
BIN=
cleanup() {
	set +e
	[ -n "$BIN" ] && "$BIN" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
for ((r = 1; r <= ROUNDS; r++)); do
	for b in "$OLD" "$NEW"; do
		BIN=$b
		rm -rf "$WORK/s" "$WORK/m"
		"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 4G --ssd 0 --pfs none >/dev/null
		out=""
		for ((k = 1; k <= DIRS; k++)); do
			out="$out | $(bin/mdtest -n "$N" -bytes "$BYTES" -phases create,stat,read,unlink "$WORK/m/d$k")"
		done
		echo "round $r $b$out"
		"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null
		BIN=
	done
done
