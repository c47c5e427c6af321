#!/usr/bin/env bash
# The simulator's QoS caps against live runs (docs/experiments/sim.md,
# "Validation → QoS caps"): the same jobs, from one workload description
# (sim.Job lines), run on real daemons by `sluice workload --jobs` and in
# `sluice sim day --machine local` of that very cluster, without a rule and
# with a rule capping one job's writes below its fair share (10 and 5
# MiB/s of the forwarding node's 40 MB/s), and with a rule giving its
# writes a share of 3 against its neighbour's 1 (share3). Two jobs share the first
# forwarding node (FWD_MBPS, the contested resource: FFM puts compute
# nodes cn0 and cn1 on it), a third has the second to itself; each writes
# its files in two phases (checkpoints, no computation between).
#   bash bench/sim/liveqos.sh               # RUNS=3 of each case, ~2 min
#   SMOKE=1 bash bench/sim/liveqos.sh       # smaller jobs, 3 runs; checked
# (the check compares medians: a single run of sub-second jobs beside the
# other smoke runs on two cores varied by 17 %, j3 at 0.81 and 0.95 s)
# Raw results: $OUT (JSON Lines, one per job, case and run: the live I/O
# time and the simulator's); tables: python3 bench/sim/liveqos_report.py $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} FWD_MBPS=${FWD_MBPS:-40} MIB=${MIB:-96}
OUT=${OUT:-bench/sim/liveqos-results.jsonl}
if [ "$SMOKE" = 1 ]; then
	RUNS=3 MIB=48 OUT=${OUT_SMOKE:-/tmp/sluice-liveqos-smoke.jsonl}
fi
CASES=${CASES:-"none|cap10|cap5|share3"}
SIMFLAGS=${SIMFLAGS:-} # e.g. --interference bench/dfra/pairwise.jsonl
rule() { # case → the rule's words ("" for none)
	case $1 in
	none) echo "" ;;
	cap10) echo "capped job=j1 op=write rate=10M" ;;
	cap5) echo "capped job=j1 op=write rate=5M" ;;
	share3) echo "favoured job=j1 op=write share=3" ;;
	*) echo "unknown case $1" >&2; exit 1 ;;
	esac
}
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d /tmp/sluice-liveqos.XXXXXX)
cleanup() { $S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
b=$((MIB << 20))
cat > "$WORK/jobs.jsonl" <<EOF
{"id":"j1","app":"w1","submit":0,"nodes":1,"on_nodes":[0],"compute":0,"pattern":"N-N","class":"bw","read":0,"write":$b,"phases":2,"meta_ops":0}
{"id":"j2","app":"w2","submit":0,"nodes":1,"on_nodes":[1],"compute":0,"pattern":"N-N","class":"bw","read":0,"write":$b,"phases":2,"meta_ops":0}
{"id":"j3","app":"w3","submit":0,"nodes":2,"on_nodes":[2,3],"compute":0,"pattern":"N-N","class":"bw","read":0,"write":$((b * 2 / 3)),"phases":2,"meta_ops":0}
EOF
: > "$WORK/results.jsonl"
IFS='|' read -r -a cases <<< "$CASES"
for run in $(seq 1 "$RUNS"); do
	for c in "${cases[@]}"; do
		r=$(rule "$c")
		$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 2 --mem 2G --ssd 0 --pfs none \
			--fwd-max-mbps "$FWD_MBPS" --fwd-policy ffm --meta-flags "--fwd-ratio 2" >/dev/null
		simq=()
		if [ -n "$r" ]; then
			# shellcheck disable=SC2086
			$S qos add --dir "$WORK/state" $r >/dev/null
			simq=(--qos "$r")
		fi
		$S workload --jobs "$WORK/jobs.jsonl" --register --state "$WORK/state" "$WORK/mnt/live" > "$WORK/live.jsonl"
		rm -rf "$WORK/sim"
		# shellcheck disable=SC2086
		$S sim day --machine local --dir "$WORK/state" --jobs "$WORK/jobs.jsonl" --policy ffm $SIMFLAGS "${simq[@]}" --out "$WORK/sim" >/dev/null
		python3 - "$c" "$run" "$WORK/live.jsonl" "$WORK/sim/jobs-ffm.jsonl" >> "$WORK/results.jsonl" <<'PY'
import json, sys
case, run, live, sim = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = {j["id"]: j for j in map(json.loads, open(sim))}
for l in open(live):
    j = json.loads(l)
    print(json.dumps({"case": case, "run": run, "id": j["id"], "bytes": j["bytes"], "live": j["io_time"],
                      "sim": s[j["id"]]["io_time"], "error": j.get("error", "")}))
PY
		$S cluster down --dir "$WORK/state" --purge >/dev/null
		rm -rf "$WORK/state" # the rules live in the metadata store, which --purge keeps
	done
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 bench/sim/liveqos_report.py --check "$OUT"
python3 bench/sim/liveqos_report.py "$OUT"
