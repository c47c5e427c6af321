#!/usr/bin/env python3
"""Tables of bench/sim/memtier.sh's runs (docs/experiments/sim.md, "6. A mem
tier in front of the PFS"): per storage spread, mem tier size and tiering,
the median over the days (min-max) of the I/O-intensive jobs' mean I/O
time, their per-job speed-up against the same day with no mem tier, the
jobs slower by more than 10 %, and what the tier did.

    python3 bench/sim/memtier_report.py [bench/sim/memtier-results.jsonl] [--check]
"""
import json, statistics, sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
path = args[0] if args else "bench/sim/memtier-results.jsonl"
runs = [json.loads(l) for l in open(path) if l.strip()]
base = {(r["day"], r["spread"]): r for r in runs if r["mem"] == "0"}


def med(xs, fmt="%.1f"):
    xs = sorted(xs)
    m = statistics.median(xs)
    if len(xs) == 1:
        return fmt % m
    return (fmt + " (" + fmt + "–" + fmt + ")") % (m, xs[0], xs[-1])


SIZES = {"0": 0, "64G": 64, "256G": 256, "1T": 1024}
cases = sorted({(r["spread"], r["mem"], r["tiering"]) for r in runs}, key=lambda c: (c[0], SIZES.get(c[1], 0), c[2]))
print("| storage | mem tier per group | tiering | I/O-intensive mean I/O (s) | per-job speed-up, median | p10 | slower > 10 % | TB to mem | TB spilled | writes waited | of them spilled after 15 s | TB moved down (of open files: moves) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
bad = []
for sp, mt, mode in cases:
    rs = [r for r in runs if (r["spread"], r["mem"], r["tiering"]) == (sp, mt, mode)]
    io = [r["stats"]["intensive_mean_io_s"] for r in rs]
    speed, slower = [], []
    for r in rs:
        b = base.get((r["day"], r["spread"]))
        if b is None:
            continue
        ups = []
        for jid, (t, _, _) in r["intensive"].items():
            bt = b["intensive"].get(jid, [0])[0]
            if t > 0 and bt > 0:
                ups.append(bt / t)
        if ups:
            ups.sort()
            speed.append((statistics.median(ups), ups[len(ups) // 10]))
            slower.append(sum(1 for u in ups if u < 1 / 1.1))
    ms = [r["mem_stats"] for r in rs if r["mem_stats"]]
    row = ["aged 5×" if sp == 5 else "as described", mt if mt != "0" else "none", mode if mode != "none" else "—", med(io)]
    if speed and mt != "0":
        row += [med([s[0] for s in speed], "%.2f"), med([s[1] for s in speed], "%.2f"), med(slower, "%d")]
    else:
        row += ["1", "1", "0"]
    if ms:
        row += [med([m["written"] / 1e12 for m in ms]), med([m["spilled"] / 1e12 for m in ms]), med([m["stalls"] for m in ms], "%d"),
                med([m["stall_spills"] for m in ms], "%d"), "%s (%s)" % (med([m["moved"] / 1e12 for m in ms]), med([m["forced"] for m in ms], "%d"))]
        for r, m in zip(rs, ms):
            if m["written"] <= 0 or (mode == "manual" and m["moves"] > 0) or (mode == "auto" and m["moves"] == 0):
                bad.append("%s day %d: %s" % ((sp, mt, mode), r["day"], m))
    else:
        row += ["—"] * 5
    print("| " + " | ".join(row) + " |")
if "--check" in sys.argv:
    if not base or bad:
        sys.exit("memtier check failed: %s" % (bad or "no run without a mem tier"))
    print("memtier check: %d runs, %d without a mem tier, every mem tier used" % (len(runs), len(base)))
