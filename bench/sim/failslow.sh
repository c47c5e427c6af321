#!/usr/bin/env bash
# Simulator: fail-slow storage targets on a day of taihulight (docs/sim.md,
# "Fail-slow storage targets"). SLOW targets (spread over the machine's)
# turn FACTOR times slower at the start of the warm-up week; each day of
# the NASA iPSC log runs with files placed round robin and by the perf
# policy (policy/place), with none slow and with SLOW slow, detection
# (policy/failslow) on: what the slow targets cost each placement, and
# when the detector named them.
#   bash bench/sim/failslow.sh [OUT]   (default: bench/sim/failslow-results.jsonl; ~1 min)
#   SMOKE=1 bash bench/sim/failslow.sh (one day; checked)
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
OUT=${1:-bench/sim/failslow-results.jsonl}
TMP=$(mktemp -d /tmp/sluice-simfs.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp "$(bench_sluice)" "$TMP/sluice"
SLOW=${SLOW:-7} FACTOR=${FACTOR:-10}
DAYS=${DAYS:-168 192 216}
if [ -n "${SMOKE:-}" ]; then DAYS=168 OUT=$TMP/smoke.jsonl; fi
: > "$OUT"
for d in $DAYS; do
	for pl in rr perf; do
		for n in 0 "$SLOW"; do
			dir=$TMP/$d-$pl-$n
			"$TMP/sluice" sim day --machine taihulight --swf sim/testdata/NASA-iPSC-1993-3.1-cln.swf.gz \
				--from "${d}h" --for 24h --warmup 168h --policy ffm --placement "$pl" \
				--slow-targets "$n" --slow-factor "$FACTOR" --detect --quiet --out "$dir" > /dev/null
			python3 - "$dir/summary.json" "$d" "$pl" "$n" "$FACTOR" >> "$OUT" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
st = s["ffm"]
det = s.get("ffm_detections") or []
print(json.dumps({"day": int(sys.argv[2]), "placement": sys.argv[3], "slow": int(sys.argv[4]), "factor": float(sys.argv[5]),
                  "intensive_mean_io_s": st["intensive_mean_io_s"], "mean_io_s": st["mean_io_s"],
                  "p95_slowdown": st["p95_slowdown"], "mean_bw": st["mean_bw"],
                  "slow_targets": s.get("ffm_slow") or [], "detected": [d["target"] for d in det if d.get("target")],
                  "detected_at_s": [d["at_s"] for d in det if d.get("target")],
                  "wrong": [d for d in det if d.get("target") and d["target"] not in (s.get("ffm_slow") or [])]}))
PY
		done
	done
done
bench_stamp "$OUT"
python3 - "$OUT" ${SMOKE:+--check} <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {(r["day"], r["placement"]): r for r in rows if r["slow"] == 0}
def med(xs):
    return f"{statistics.median(xs):,.2f} ({min(xs):,.2f}-{max(xs):,.2f})" if xs else "-"
print("| placement | slow targets | days | I/O-intensive mean I/O time × none slow | p95 slowdown | named by the detector | hours after turning slow, median |")
print("|---|---|---|---|---|---|---|")
bad = []
for pl in ("rr", "perf"):
    for n in sorted({r["slow"] for r in rows}):
        rs = [r for r in rows if r["placement"] == pl and r["slow"] == n]
        x = [r["intensive_mean_io_s"] / base[(r["day"], pl)]["intensive_mean_io_s"] for r in rs]
        named = [f"{len(r['detected'])}/{len(r['slow_targets'])}" for r in rs]
        hrs = [statistics.median(r["detected_at_s"]) / 3600 for r in rs if r["detected_at_s"]]
        print(f"| {pl} | {n} | {len(rs)} | {med(x)} | {med([r['p95_slowdown'] for r in rs])} | {', '.join(named)} | {med(hrs)} |")
        for r in rs:
            if r["wrong"]:
                bad.append(f"day {r['day']} {pl}: named targets that were not slow: {r['wrong']}")
            if n and not r["detected"]:
                bad.append(f"day {r['day']} {pl}: no slow target named")
if "--check" in sys.argv:
    if bad:
        sys.exit("failslow check failed:\n  " + "\n  ".join(bad))
    print("failslow check: slow targets named, no healthy one")
PY
