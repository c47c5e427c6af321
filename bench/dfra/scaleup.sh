#!/usr/bin/env bash
# DFRA's scale-up curve with real daemons: an N-N bandwidth-heavy job on
# NODES emulated compute nodes (one host; each rank carries its node in
# SLURMD_NODENAME), all on one forwarding node under the fixed mapping
# (--fwd-ratio = NODES). Forwarding nodes are capped at FWD_MBPS, the mem
# data server at DATA_MBPS, so the emulated hardware, not the host, is the
# bottleneck. The job runs RUNS times in a row, registered with the DFRA
# manager; after each run its profile is rebuilt. A run that filled its
# forwarding nodes is given twice as many next time, so the runs trace the
# job's bandwidth against its number of forwarding nodes until the data
# server's cap stops the climb.
#
#   bash bench/dfra/scaleup.sh           # 8 nodes, 5 runs, ~2 min
#   SMOKE=1 bash bench/dfra/scaleup.sh   # 4 nodes, 3 runs, small
#
# Prints a Markdown table (docs/experiments/dfra.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
	NODES=${NODES:-4}; RUNS=${RUNS:-3}; SIZE=${SIZE:-8M}; FWDS=${FWDS:-4}
else
	NODES=${NODES:-8}; RUNS=${RUNS:-5}; SIZE=${SIZE:-24M}; FWDS=${FWDS:-8}
fi
FWD_MBPS=${FWD_MBPS:-40}
DATA_MBPS=${DATA_MBPS:-150}
OUT=${OUT:-bench/dfra/scaleup.jsonl}
BIN=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-scaleup.XXXXXX)
cleanup() { "$BIN" cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$BIN" cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds "$FWDS" --mem 4G --ssd 0 --pfs none \
	--fwd-max-mbps "$FWD_MBPS" --data-max-mbps "$DATA_MBPS" \
	--meta-flags "--fwd-ratio $NODES --dfra-vmin 16M" >/dev/null
nodes=$(seq -s, -f 'cn%g' 0 $((NODES - 1)))
: > "$WORK/results.jsonl"
for i in $(seq 1 "$RUNS"); do
	j=$("$BIN" workload --json --register --state "$WORK/state" --kind nn --app wide --job "wide-$i" \
		--ranks "$NODES" --nodes "$nodes" --size "$SIZE" "$WORK/mnt/wide-$i")
	sleep 2.5 # the run's last records reach the store
	rep=$("$BIN" job show --json --dir "$WORK/state" "wide-$i")
	python3 - "$j" "$rep" >> "$WORK/results.jsonl" <<'PY'
import json, sys
run, rep = json.loads(sys.argv[1]), json.loads(sys.argv[2])
start = [d for d in rep.get("Decisions") or [] if d["Event"] == "start"]
fwds = sorted({s["Server"] for s in rep["Servers"] if s["Layer"] == 2 and s["Bytes"] > 0})
print(json.dumps({"job": run["Job"], "bytes": run["Bytes"], "slowest_ns": run["Slowest"], "fwds": fwds,
                  "policy": start[0]["Policy"] if start else "", "reasons": start[0]["Reasons"] if start else []}))
PY
	"$BIN" profile build --dir "$WORK/state" "wide-$i" >/dev/null
done
"$BIN" cluster down --dir "$WORK/state" --purge >/dev/null
bench_stamp "$WORK/results.jsonl"
cp "$WORK/results.jsonl" "$OUT"
python3 - "$OUT" "$FWD_MBPS" "$DATA_MBPS" "$RUNS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
fwd, data = float(sys.argv[2]), float(sys.argv[3])
# the figures must be there and sane (make dfra-smoke), not only the exit status
bad = [f"{len(rows)} runs recorded, want {sys.argv[4]}"] if len(rows) != int(sys.argv[4]) else []
for i, r in enumerate(rows, 1):
    if not r["fwds"] or r["bytes"] <= 0 or r["slowest_ns"] <= 0:
        bad.append(f"run {i}: forwarding nodes {r['fwds']}, {r['bytes']} bytes in {r['slowest_ns']} ns")
    if i > 1 and r["policy"] not in ("dfra", "ffm"):
        bad.append(f"run {i}: no allocation decision recorded ({r['policy']!r})")
    if r["bytes"] / max(r["slowest_ns"], 1) * 1e3 > 2 * len(r["fwds"]) * fwd:
        bad.append(f"run {i}: faster than its forwarding nodes' caps allow")
if bad:
    sys.exit("scale-up check failed:\n  " + "\n  ".join(bad))
print(f"\nforwarding nodes capped at {fwd:.0f} MB/s, mem data server at {data:.0f} MB/s\n")
print("| run | forwarding nodes | bandwidth (MB/s) | ideal min(n×fwd, data) | decision |")
print("|---|---|---|---|---|")
for i, r in enumerate(rows, 1):
    n = len(r["fwds"])
    bw = r["bytes"] / (r["slowest_ns"] / 1e9) / 1e6
    why = "; ".join(r["reasons"]).replace("|", "/")
    print(f"| {i} | {n} | {bw:.0f} | {min(n * fwd, data):.0f} | {r['policy']}: {why} |")
PY
