# shellcheck shell=bash
# Sourced by the side-by-side scripts (bench/streams-ab.sh,
# bench/randread4-ab.sh): two sides run in turn so that a
# drift of the machine falls on both alike.
#
# alternate RUNS FN X Y: calls `FN X r` and `FN Y r` for r = 1..RUNS, X
# first in odd runs and Y first in even ones.
alternate() {
	local runs=$1 fn=$2 x=$3 y=$4 r
	for r in $(seq "$runs"); do
		if [ $((r % 2)) = 1 ]; then
			"$fn" "$x" "$r"
			"$fn" "$y" "$r"
		else
			"$fn" "$y" "$r"
			"$fn" "$x" "$r"
		fi
	done
}
