#!/usr/bin/env bash
# Two or more builds or configurations of sluice side by side on one
# benchmark script, interleaved round by round (bench/lib.sh): every
# round runs the script once per side, the order rotated, and every JSON
# line it writes is tagged with the side's label, commit, configuration,
# round and machine into one results file.
#
#   bash bench/ab.sh [-r ROUNDS] [-o OUT] SIDE SIDE... -- SCRIPT [ARGS...]
#   SIDE = LABEL=REV[:UPFLAGS]   (REV "." is this tree; UPFLAGS are extra
#                                 `sluice cluster up` flags)
#
#   bash bench/ab.sh old=b3ad71b new=. -- bench/streams.sh
#   bash bench/ab.sh -r 4 on=. off=.:--monitor=false -- bench/streams.sh
#   COUNT=0 bash bench/ab.sh old=HEAD~1 new=. -- bench/smallfiles/run.sh
#
# The script is run with ROUNDS=1 (one round of its own per side and
# round), SLUICE_BIN (the side's build), SLUICE_BIN_REV (its REV), UP
# (its flags) and OUT (a fresh path); its results are the JSON lines it wrote to OUT (a file, or
# OUT/*.jsonl when it made a directory) or, if none, those it printed.
# Other settings pass through the environment (e.g. STREAMS="1 4").
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=3 OUT=""
while getopts r:o: o; do
	case $o in
	r) ROUNDS=$OPTARG ;;
	o) OUT=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
SIDES=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	SIDES+=("$1")
	shift
done
[ "${1:-}" = -- ] && shift
SCRIPT=${1:?usage: bench/ab.sh [-r ROUNDS] [-o OUT] LABEL=REV[:UPFLAGS]... -- SCRIPT [ARGS]}
shift
ARGS=("$@")
[ ${#SIDES[@]} -ge 2 ] || { echo "bench/ab.sh: want two sides or more" >&2; exit 2; }
name=$(basename "$SCRIPT" .sh)
[ "$name" = run ] && name=$(basename "$(dirname "$SCRIPT")")
OUT=${OUT:-bench/results/ab-$name-$(date +%Y%m%d-%H%M).jsonl}
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d /tmp/sluice-ab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
declare -A BIN
for s in "${SIDES[@]}"; do # build every side's commit first, once
	spec=${s#*=} rev=${spec%%:*}
	BIN[$rev]=$(bench_bin "$rev")
done
side() { # SIDE ROUND
	local label=${1%%=*} spec=${1#*=} rev flags out
	rev=${spec%%:*}
	flags=""
	[ "$spec" != "$rev" ] && flags=${spec#*:}
	out=$WORK/$label-$2
	echo "ab: round $2, $label ($rev${flags:+ $flags})" >&2
	ROUNDS=1 SLUICE_BIN=${BIN[$rev]} SLUICE_BIN_REV=$rev UP=$flags OUT=$out bash "$SCRIPT" "${ARGS[@]}" >"$out.stdout"
	{
		if [ -f "$out" ]; then
			cat "$out"
		elif [ -d "$out" ] && compgen -G "$out/*.jsonl" >/dev/null; then
			cat "$out"/*.jsonl
		else
			cat "$out.stdout"
		fi
	} | bench_tag "$label" "$rev" "$flags" "$2" >>"$OUT"
}
bench_rotate "$ROUNDS" side "${SIDES[@]}"
echo "ab: $(wc -l <"$OUT") results in $OUT" >&2
