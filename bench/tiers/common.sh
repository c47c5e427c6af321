# shellcheck shell=bash
# Shared set-up of the tiering experiments (sourced by threshold.sh,
# prefetch.sh, checkpoint.sh): builds bin/sluice, makes a work directory
# $WORK and stops the cluster in $WORK/state and removes $WORK on exit
# (KEEP=1 leaves them). $S is the binary.
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit
# shellcheck source=bench/lib.sh
. bench/lib.sh
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d "/tmp/sluice-$1.XXXXXX")
cleanup() {
	[ "${KEEP:-0}" = 1 ] && return
	$S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
# down stops a case's cluster and removes its state: the next case starts
# from an empty cluster.
down() {
	$S cluster down --dir "$WORK/state" --purge >/dev/null
	rm -rf "$WORK/state"
}
: > "$WORK/results.jsonl"
