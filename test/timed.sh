#!/bin/bash
# Runs the make targets given, in order, as `make test` does; stops at the
# first that fails and prints how long each took (the whole run's budget
# on the CI machine is 35 minutes: README.md, Tests). A+B+C runs targets
# A, B and C at once (their output printed after, one by one): targets
# that are not timed and not CPU-bound all the time, beside each other.
# A+~B runs B at the lowest CPU priority (nice 19) beside A: a target that
# keeps the cores busy but times nothing (fuzzing, the simulator) takes
# only the CPU that a timed target (the end-to-end tests, mostly waiting on
# daemons and timeouts) leaves idle.
# Beside each target's seconds it prints the CPU seconds (user + system)
# its processes spent: what decides which targets may go beside others.
set -u
total=$(date +%s)
rows=()
failed=""
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# cpu FILE: the user + system seconds /usr/bin/time wrote to FILE
cpu() { awk 'END { printf "%.0f", $1 + $2 }' "$1" 2>/dev/null; }
# timed FILE CMD...: CMD, its CPU seconds into FILE where GNU time is
timed() {
	local f=$1
	shift
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -o "$f" -f "%U %S" "$@"
	else
		"$@"
	fi
}
for step in "$@"; do
	start=$(date +%s)
	IFS=+ read -r -a group <<<"$step"
	if [ ${#group[@]} -eq 1 ]; then
		timed "$logs/$step.cpu" make --no-print-directory "$step"
		rc=$?
		rows+=("$step $(($(date +%s) - start)) $(cpu "$logs/$step.cpu")")
		[ $rc -ne 0 ] && failed=$step
	else
		pids=()
		for i in "${!group[@]}"; do
			t=${group[$i]}
			nice=()
			if [ "${t:0:1}" = "~" ]; then
				t=${t:1}
				group[i]=$t
				nice=(nice -n 19)
			fi
			(
				s=$(date +%s)
				timed "$logs/$t.cpu" "${nice[@]}" make --no-print-directory "$t" >"$logs/$t.log" 2>&1
				rc=$?
				echo "$(($(date +%s) - s)) $rc" >"$logs/$t.rc"
			) &
			pids+=($!)
		done
		wait "${pids[@]}"
		for t in "${group[@]}"; do
			echo "== $t (beside ${step//+/, }; ~ at nice 19)"
			cat "$logs/$t.log"
			read -r secs rc <"$logs/$t.rc"
			rows+=("$t $secs $(cpu "$logs/$t.cpu")")
			[ "$rc" -ne 0 ] && failed="$failed $t"
		done
		rows+=("($step) $(($(date +%s) - start))")
	fi
	if [ -n "$failed" ]; then
		break
	fi
done
echo "== make test: seconds per target (wall, and CPU of its processes)"
printf '%s\n' "${rows[@]}" | awk '{ if ($3 != "") printf "%-45s %5d %6d cpu\n", $1, $2, $3; else printf "%-45s %5d\n", $1, $2 }'
echo "total $(($(date +%s) - total))"
if [ -n "$failed" ]; then
	echo "make test: $failed failed"
	exit 1
fi
