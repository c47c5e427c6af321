#!/usr/bin/env bash
# Another build beside this one in one sitting (issue 18's before and
# after, docs/benchmarks.md "Issue 18 before and after, in one sitting"):
# the build of commit OLD and this tree's alternate, one round each at a
# time, ROUNDS times, in bench/streams.sh (1, 2 and 4 streams of 1 GiB
# against the go-fuse passthrough) and bench/smallfiles/run.sh (mdtest's
# phases against it, rates only).
#
#   OLD=b3ad71b bash bench/before-after.sh          # ~10 min
#   python3 bench/before_after.py STREAMS.jsonl SMALLDIR   # the tables
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${OLD:?OLD=commit}
ROUNDS=${ROUNDS:-3}
DAY=$(date +%Y%m%d)
SOUT=${STREAMS_OUT:-bench/results/streams-$DAY-$OLD.jsonl}
SMALL=${SMALL_OUT:-bench/results/smallfiles/ba-$DAY-$OLD}
OLDBIN=/tmp/sluice-$OLD
if [ ! -x "$OLDBIN" ]; then
	tree=$(mktemp -d /tmp/sluice-old.XXXXXX)
	git worktree add -q --detach "$tree" "$OLD"
	(cd "$tree" && go build -o "$OLDBIN" ./cmd/sluice)
	git worktree remove --force "$tree"
fi
for ((i = 1; i <= ROUNDS; i++)); do
	if ((i % 2)); then order="old new"; else order="new old"; fi
	for b in $order; do
		bin=()
		[ "$b" = old ] && bin=(env SLUICE_BIN="$OLDBIN")
		"${bin[@]}" env ROUNDS=1 OUT="$SOUT" bash bench/streams.sh >/dev/null
		"${bin[@]}" env COUNT=0 ROUNDS=1 OUT="$SMALL/$b-$i" bash bench/smallfiles/run.sh >/dev/null
	done
done
python3 bench/before_after.py "$SOUT" "$SMALL"
