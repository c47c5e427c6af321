#!/usr/bin/env bash
# DFRA with forwarding nodes scarce: more jobs than forwarding daemons, as on
# a real machine (TaihuLight: 240 forwarding nodes for thousands of jobs).
# JOBS jobs of different behaviours run at once, each on its own emulated
# compute node, over FWDS forwarding daemons (FWD_RATIO compute nodes per
# forwarding node under the fixed mapping, so FFM puts two jobs on each).
# Which node each job lands on is drawn per repeat (a scheduler's choice the
# policy does not control) and is the same under both policies, so each
# repeat compares FFM and DFRA on the same placement of jobs on nodes.
# Jobs start STAGGER seconds apart in the drawn order (arrivals).
#
# Every behaviour first runs alone twice per policy (the first run builds
# its profile, as in the pairwise study). Each mix is then run REPEATS times
# under each policy; for every job the script keeps its I/O time (slowest
# rank), its bytes and operations, when it was registered and ended, the
# forwarding nodes it used and what crossed them (Beacon's per-server
# figures), and the manager's decision with its reasons (`sluice job show --json`); sim/validate_dfra_test.go replays
# the runs in the simulator.
#
#   bash bench/dfra/scarce.sh             # 6 jobs on 3 forwarding nodes, 3 repeats, ~8 min
#   SMOKE=1 bash bench/dfra/scarce.sh     # 4 jobs on 2, 1 repeat, small sizes
#
# Raw results: $OUT (JSON Lines), $PROFILES (the applications' profiles
# before each repeat) and $MACHINE (the cluster as `sluice sim day --machine
# local` describes it); tables: python3 bench/dfra/scarce.py $OUT
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
	KINDS=${KINDS:-"nn meta iops log"}; SCALE=${SCALE:-1}; FWDS=${FWDS:-2}; REPEATS=${REPEATS:-1}
else
	KINDS=${KINDS:-"nn n1 meta iops read log"}; SCALE=${SCALE:-3}; FWDS=${FWDS:-3}; REPEATS=${REPEATS:-3}
fi
FWD_RATIO=${FWD_RATIO:-2}
FWD_MBPS=${FWD_MBPS:-40}
FWD_IOPS=${FWD_IOPS:-800}
STAGGER=${STAGGER:-0.3}
OUT=${OUT:-bench/dfra/scarce.jsonl}
PROFILES=${PROFILES:-${OUT%.jsonl}-profiles.jsonl} # the profiles DFRA decided from, before each repeat
MACHINE=${MACHINE:-${OUT%.jsonl}-machine.json} # the cluster as `sluice sim day --machine local` describes it
BIN=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-scarce.XXXXXX)
cleanup() { "$BIN" cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT

read -r -a kinds <<< "$KINDS"
njobs=${#kinds[@]}
# shellcheck source=bench/dfra/kinds.sh
. bench/dfra/kinds.sh
runjob() { # mode kind id node → the run's JSON (job summary)
	# shellcheck disable=SC2046
	"$BIN" workload --json --register --state "$WORK/state" --kind "$2" --app "$2" --job "$3" \
		--nodes "$4" $(args "$2") "$WORK/mnt/$3"
}
record() { # mode repeat kind node run-json → one result line
	job=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["Job"])' "$5")
	rep=$("$BIN" job show --json --dir "$WORK/state" "$job")
	python3 - "$1" "$2" "$3" "$4" "$5" "$rep" "$(fwdfig "$BIN" "$WORK/state" "$job")" >> "$WORK/results.jsonl" <<'PY'
import json, sys
mode, repeat, kind, node, run, rep, fwd = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5]), json.loads(sys.argv[6]), json.loads(sys.argv[7])
start = [d for d in rep.get("Decisions") or [] if d["Event"] == "start"]
end = [d for d in rep.get("Decisions") or [] if d["Event"] == "end"]
print(json.dumps({"mode": mode, "repeat": repeat, "kind": kind, "node": node, "job": run["Job"],
                  "bytes": run["Bytes"], "ops": run["Ops"], "slowest_ns": run["Slowest"], "elapsed_ns": run["Elapsed"],
                  "start_ns": start[0]["At"] if start else 0, "end_ns": end[-1]["At"] if end else 0, "fwds": fwd["fwds"],
                  "fwd_bytes": fwd["fwd_bytes"], "fwd_ops": fwd["fwd_ops"],
                  "decided": start[0].get("Fwds") if start else None, "dedicated": bool(start and start[0].get("Dedicated")),
                  "policy": start[0]["Policy"] if start else "", "reasons": start[0]["Reasons"] if start else []}))
PY
}

# the node of each job in each repeat: a permutation of cn0..cn(JOBS-1) per
# repeat, drawn once so both policies see the same one
python3 - "$njobs" "$REPEATS" > "$WORK/perms" <<'PY'
import random, sys
n, r = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(20261125)
for _ in range(r):
    p = list(range(n)); rng.shuffle(p); print(" ".join(map(str, p)))
PY

: > "$WORK/results.jsonl"
: > "$WORK/profiles.jsonl"
for mode in ffm dfra; do
	"$BIN" cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds "$FWDS" --mem 6G --ssd 0 --pfs none \
		--fwd-max-mbps "$FWD_MBPS" --fwd-max-iops "$FWD_IOPS" --fwd-policy "$mode" \
		--meta-flags "--fwd-ratio $FWD_RATIO --dfra-vmin 16M" >/dev/null
	# the simulator's description of this very cluster (the same under
	# both policies): the replay runs on it, side by side with these runs
	"$BIN" sim day --machine local --dir "$WORK/state" --print-machine > "$WORK/machine.json"
	for k in "${kinds[@]}"; do
		# alone, twice, on cn0: the first run builds the application's profile
		j=$(runjob "$mode" "$k" "$mode-$k-seed" cn0)
		sleep 2.5 # the run's last records reach the store
		"$BIN" profile build --dir "$WORK/state" "$mode-$k-seed" >/dev/null
		j=$(runjob "$mode" "$k" "$mode-$k-alone" cn0)
		sleep 2.5
		record "$mode" 0 "$k" cn0 "$j"
	done
	r=0
	while read -r -a perm; do
		r=$((r + 1))
		"$BIN" profile show --json --dir "$WORK/state" |
			python3 -c 'import json,sys; [print(json.dumps({"mode": sys.argv[1], "repeat": int(sys.argv[2]), "profile": json.loads(l)})) for l in sys.stdin]' "$mode" "$r" >> "$WORK/profiles.jsonl"
		pids=()
		for i in "${!kinds[@]}"; do
			k=${kinds[$i]}
			runjob "$mode" "$k" "$mode-$k-mix$r" "cn${perm[$i]}" > "$WORK/mix-$i.json" &
			pids+=($!)
			sleep "$STAGGER"
		done
		for p in "${pids[@]}"; do wait "$p"; done
		sleep 2.5
		for i in "${!kinds[@]}"; do
			record "$mode" "$r" "${kinds[$i]}" "cn${perm[$i]}" "$(cat "$WORK/mix-$i.json")"
		done
	done < "$WORK/perms"
	"$BIN" cluster down --dir "$WORK/state" --purge >/dev/null
done
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
cp "$WORK/profiles.jsonl" "$PROFILES"
cp "$WORK/machine.json" "$MACHINE"
python3 bench/dfra/scarce.py --check "$OUT" "$FWDS" "$REPEATS"
python3 bench/dfra/scarce.py "$OUT" "$FWDS"
