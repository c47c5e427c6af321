#!/bin/bash
# Runs the make targets given, in order, as `make test` does; stops at the
# first that fails and prints how long each took (the whole run's budget
# on the CI machine is 35 minutes: README.md, Tests).
set -u
total=$(date +%s)
rows=()
failed=""
for t in "$@"; do
	start=$(date +%s)
	make --no-print-directory "$t"
	rc=$?
	rows+=("$t $(($(date +%s) - start))")
	if [ $rc -ne 0 ]; then
		failed=$t
		break
	fi
done
echo "== make test: seconds per target"
printf '%s\n' "${rows[@]}" | awk '{ printf "%-18s %5d\n", $1, $2 }'
echo "total              $(($(date +%s) - total))"
if [ -n "$failed" ]; then
	echo "make test: $failed failed"
	exit 1
fi
