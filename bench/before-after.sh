#!/usr/bin/env bash
# Another build beside this one in one sitting (docs/benchmarks.md): the
# build of commit OLD ("old") and this tree ("new") through bench/ab.sh,
# interleaved round by round, ROUNDS rounds each, on bench/streams.sh (1, 2
# and 4 streams of 1 GiB against the go-fuse passthrough) and then on
# bench/smallfiles/run.sh (mdtest's phases against it, rates only).
#
#   OLD=b3ad71b bash bench/before-after.sh          # ~10 min
#   python3 bench/before_after.py STREAMS.jsonl SMALL.jsonl   # the tables again
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OLD=${OLD:?OLD=commit}
ROUNDS=${ROUNDS:-3}
DAY=$(date +%Y%m%d)
SOUT=${STREAMS_OUT:-bench/results/streams-$DAY-$OLD.jsonl}
SMALL=${SMALL_OUT:-bench/results/smallfiles/ba-$DAY-$OLD.jsonl}
bash bench/ab.sh -r "$ROUNDS" -o "$SOUT" old="$OLD" new=. -- bench/streams.sh
COUNT=0 bash bench/ab.sh -r "$ROUNDS" -o "$SMALL" old="$OLD" new=. -- bench/smallfiles/run.sh
python3 bench/before_after.py "$SOUT" "$SMALL"
