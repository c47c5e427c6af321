#!/usr/bin/env bash
# DFRA's pairwise interference study with real daemons: every pair of the
# workload generator's behaviours runs concurrently, first with every job
# on the fixed mapping (FFM: the node's one forwarding node), then with the
# DFRA manager placing registered jobs from their profiles. Each job's I/O
# time paired is divided by its I/O time alone. Forwarding nodes are capped
# in bandwidth and request rate (--fwd-max-mbps, --fwd-max-iops) so that
# their link, not the 2-core machine, is the shared resource, as on a real
# system; jobs are sized to run a few seconds alone.
#
#   bash bench/dfra/pairwise.sh            # all eight behaviours, ~15 min
#   SMOKE=1 bash bench/dfra/pairwise.sh    # three behaviours, small sizes
#
# Prints the two slowdown matrices as Markdown (docs/experiments/dfra.md).
# The runs alone keep what crossed the forwarding layer and its caps:
# `sluice sim day --interference FILE --interference-model factors` calibrates
# from them (sim.FactorsFromDFRA).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
	KINDS=${KINDS:-"nn meta iops"}; SCALE=${SCALE:-1}
else
	KINDS=${KINDS:-"nn n1 11 meta iops ckpt read log"}; SCALE=${SCALE:-3}
fi
FWD_MBPS=${FWD_MBPS:-40}
FWD_IOPS=${FWD_IOPS:-800}
OUT=${OUT:-bench/dfra/pairwise.jsonl}
BIN=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-dfra.XXXXXX)
cleanup() {
	fusermount3 -u "$WORK/mnt2" 2>/dev/null || true
	"$BIN" cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=bench/dfra/kinds.sh
. bench/dfra/kinds.sh
runjob() { # mode kind tag [mount node] → one JSON line (job summary); tags are unique
	# shellcheck disable=SC2046
	"$BIN" workload --json --register --state "$WORK/state" --kind "$2" --app "$2" --job "$1-$2-$3" \
		--nodes "${5:-cn1}" $(args "$2") "${4:-$WORK/mnt}/$1-$2-$3"
}

: > "$WORK/results.jsonl"
for mode in ffm dfra; do
	"$BIN" cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 4 --mem 6G --ssd 0 --pfs none \
		--fwd-max-mbps "$FWD_MBPS" --fwd-max-iops "$FWD_IOPS" --fwd-policy "$mode" --meta-flags "--dfra-vmin 16M" >/dev/null
	# the second job of a pair runs on another compute node: its own mount
	# (cn1 and cn2 share a forwarding node under the fixed mapping)
	mkdir -p "$WORK/mnt2"
	"$BIN" mount --meta "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["MetaAddr"])' "$WORK/state/cluster.json")" \
		--secret-file "$WORK/state/secret" --node cn2 "$WORK/mnt2" > "$WORK/mount2.log" 2>&1 &
	MOUNT2=$!
	for _ in $(seq 100); do mountpoint -q "$WORK/mnt2" && break; sleep 0.1; done
	for k in $KINDS; do
		# alone, twice: the first run builds the application's profile
		j=$(runjob "$mode" "$k" seed)
		sleep 2.5
		"$BIN" profile build --dir "$WORK/state" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["Job"])' "$j")" >/dev/null
		j=$(runjob "$mode" "$k" alone)
		sleep 2.5 # the run's last records reach the store
		fig=$(fwdfig "$BIN" "$WORK/state" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["Job"])' "$j")")
		echo "{\"mode\":\"$mode\",\"kind\":\"$k\",\"with\":\"\",\"run\":$j,\"fwd\":$fig,\"fwd_mbps\":$FWD_MBPS,\"fwd_iops\":$FWD_IOPS}" >> "$WORK/results.jsonl"
	done
	for a in $KINDS; do
		for b in $KINDS; do
			[[ "$a" < "$b" || "$a" == "$b" ]] || continue
			runjob "$mode" "$a" "with-$b-x" > "$WORK/a.json" &
			pa=$!
			runjob "$mode" "$b" "with-$a-y" "$WORK/mnt2" cn2 > "$WORK/b.json"
			wait $pa
			echo "{\"mode\":\"$mode\",\"kind\":\"$a\",\"with\":\"$b\",\"run\":$(cat "$WORK/a.json")}" >> "$WORK/results.jsonl"
			echo "{\"mode\":\"$mode\",\"kind\":\"$b\",\"with\":\"$a\",\"run\":$(cat "$WORK/b.json")}" >> "$WORK/results.jsonl"
		done
	done
	fusermount3 -u "$WORK/mnt2"; wait "$MOUNT2" || true
	"$BIN" cluster down --dir "$WORK/state" --purge >/dev/null
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/dfra/report.py "$OUT"
