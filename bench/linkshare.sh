#!/usr/bin/env bash
# A forwarding node's link shared between a reader and a writer (docs/qos.md,
# "The forwarding daemon's link"): two forwarding daemons capped at MBPS, the
# fixed mapping (cn0 and cn1 on the first), the mount's block cache off. Per
# round: the reader alone (3 passes over a 32 MiB file, `sluice workload
# --kind read`), then a 400 MiB writer on cn0 with the same reader started a
# second later on cn1, then the writer alone. The same rounds with sluice
# built at REF (before the bulk gate owned the link) in the same run.
# Prints medians (min-max) and the reader's time beside the writer over its
# time alone (fair: about 2, half the link); raw results: $OUT.
#   bash bench/linkshare.sh            # 3 rounds of each build, ~5 min
set -euo pipefail
# a kill of this script, kill -9 too, takes its clusters down and removes
# their state (sluice cluster up --exit-with, --exit-remove)
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3} MBPS=${MBPS:-40} REF=${REF:-7b94a40} OUT=${OUT:-bench/results/linkshare.jsonl}
WORK=$(mktemp -d /tmp/sluice-linkshare.XXXXXX)
cleanup() {
	set +e
	for b in now before; do [ -x "$WORK/$b" ] && "$WORK/$b" down --dir "$WORK/state" --purge >/dev/null 2>&1; done
	git worktree remove --force "$WORK/ref" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
go build -o "$WORK/now" ./cmd/sluice
git worktree add -q --detach "$WORK/ref" "$REF"
(cd "$WORK/ref" && go build -o "$WORK/before" ./cmd/sluice)
t() { python3 -c 'import json,sys; print(json.load(sys.stdin)["Slowest"]/1e9)'; }
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
for round in $(seq "$ROUNDS"); do
	for b in now before; do
		S=$WORK/$b
		$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 2 --mem 2G --ssd 0 --pfs none --fwd-max-mbps "$MBPS" \
			--fwd-policy ffm --meta-flags "--fwd-ratio 2" --mount-flags "--read-cache 0" >/dev/null
		alone=$($S workload --json --kind read --ranks 1 --size 32M --nodes cn1 --job r0 "$WORK/mnt/r0" | t)
		$S workload --json --kind ckpt --bursts 1 --ranks 1 --size 400M --nodes cn0 --job w1 "$WORK/mnt/w1" | t > "$WORK/w" &
		sleep 1
		beside=$($S workload --json --kind read --ranks 1 --size 32M --nodes cn1 --job r1 "$WORK/mnt/r1" | t)
		wait
		wbeside=$(cat "$WORK/w")
		walone=$($S workload --json --kind ckpt --bursts 1 --ranks 1 --size 400M --nodes cn0 --job w2 "$WORK/mnt/w2" | t)
		$S cluster down --dir "$WORK/state" --purge >/dev/null
		rm -rf "$WORK/state"
		echo "{\"build\":\"$b\",\"round\":$round,\"reader_alone\":$alone,\"reader_beside\":$beside,\"writer_beside\":$wbeside,\"writer_alone\":$walone}" | tee -a "$OUT"
	done
done
python3 - "$OUT" "$REF" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def cell(v):
    return "%.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
print("| build | reader alone s | reader beside the writer s | beside / alone (fair: ~2) | writer alone s | writer beside the reader s |")
print("|---|---|---|---|---|---|")
for b, name in (("before", "before (%s)" % sys.argv[2]), ("now", "now")):
    r = [x for x in rows if x["build"] == b]
    print("| %s | %s | %s | %s | %s | %s |" % (name, cell([x["reader_alone"] for x in r]), cell([x["reader_beside"] for x in r]),
          cell([x["reader_beside"] / x["reader_alone"] for x in r]), cell([x["writer_alone"] for x in r]), cell([x["writer_beside"] for x in r])))
PY
