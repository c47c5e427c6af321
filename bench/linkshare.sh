#!/usr/bin/env bash
# A forwarding node's link shared between a reader and a writer (docs/qos.md,
# "The forwarding daemon's link"): two forwarding daemons capped at MBPS, the
# fixed mapping (cn0 and cn1 on the first), the mount's block cache off. Per
# round: the reader alone (3 passes over a 32 MiB file, `sluice workload
# --kind read`), then a 400 MiB writer on cn0 with the same reader started a
# second later on cn1, then the writer alone. Prints medians (min-max) and
# the reader's time beside the writer over its time alone (fair: about 2,
# half the link), per side when the lines name one; raw results: $OUT.
#   bash bench/linkshare.sh                                  # 3 rounds, ~2½ min
#   bash bench/ab.sh now=. before=7b94a40 -- bench/linkshare.sh   # beside the build before
#   bash bench/linkshare.sh --table FILE                     # the table again
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
table() {
	python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def cell(v):
    return "%.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
print("| build | reader alone s | reader beside the writer s | beside / alone (fair: ~2) | writer alone s | writer beside the reader s |")
print("|---|---|---|---|---|---|")
for side in dict.fromkeys(x.get("side", "") for x in rows):
    r = [x for x in rows if x.get("side", "") == side]
    name = side or r[0].get("commit", "")[:7]
    print("| %s | %s | %s | %s | %s | %s |" % (name, cell([x["reader_alone"] for x in r]), cell([x["reader_beside"] for x in r]),
          cell([x["reader_beside"] / x["reader_alone"] for x in r]), cell([x["writer_alone"] for x in r]), cell([x["writer_beside"] for x in r])))
PY
}
if [ "${1:-}" = --table ]; then
	table "$2"
	exit
fi
ROUNDS=${ROUNDS:-3} MBPS=${MBPS:-40} OUT=${OUT:-bench/results/linkshare.jsonl}
S=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-linkshare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
t() { python3 -c 'import json,sys; print(json.load(sys.stdin)["Slowest"]/1e9)'; }
mkdir -p "$(dirname "$OUT")"
: >"$WORK/out.jsonl"
for round in $(seq "$ROUNDS"); do
	# shellcheck disable=SC2086
	$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 2 --mem 2G --ssd 0 --pfs none --fwd-max-mbps "$MBPS" \
		--fwd-policy ffm --meta-flags "--fwd-ratio 2" --mount-flags "--read-cache 0" ${UP:-} >/dev/null
	alone=$($S workload --json --kind read --ranks 1 --size 32M --nodes cn1 --job r0 "$WORK/mnt/r0" | t)
	$S workload --json --kind ckpt --bursts 1 --ranks 1 --size 400M --nodes cn0 --job w1 "$WORK/mnt/w1" | t >"$WORK/w" &
	sleep 1
	beside=$($S workload --json --kind read --ranks 1 --size 32M --nodes cn1 --job r1 "$WORK/mnt/r1" | t)
	wait
	wbeside=$(cat "$WORK/w")
	walone=$($S workload --json --kind ckpt --bursts 1 --ranks 1 --size 400M --nodes cn0 --job w2 "$WORK/mnt/w2" | t)
	$S cluster down --dir "$WORK/state" --purge >/dev/null
	rm -rf "$WORK/state"
	echo "{\"round\":$round,\"reader_alone\":$alone,\"reader_beside\":$beside,\"writer_beside\":$wbeside,\"writer_alone\":$walone}" | tee -a "$WORK/out.jsonl"
done
bench_stamp "$WORK/out.jsonl"
cat "$WORK/out.jsonl" >"$OUT"
table "$OUT"
