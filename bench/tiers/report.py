#!/usr/bin/env python3
"""Summarises bench/tiers/threshold.jsonl as Markdown (docs/experiments/tiers.md):
per pattern and configuration the writer's bandwidth (median and range over
runs), the bandwidth of the bursts after the first, failed writes, the
slowest file, where the files ended; then the mem tier's usage timeline of
the first run of each case, against the thresholds.

    report.py RESULTS.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = defaultdict(list)
for r in rows:
    cases[(r["pattern"], r["mode"])].append(r)


def spread(xs, fmt="%.1f"):
    if not xs:
        return "-"
    m = statistics.median(xs)
    return (fmt % m) + " (" + (fmt % min(xs)) + "–" + (fmt % max(xs)) + ")"


r0 = rows[0]
print("mem tier %d MiB at %.0f MB/s, ssd tier at %.0f MB/s; %d runs per case; thresholds Cs-w,Cf-m,Cn-m: %s\n" % (
    r0["mem_mib"], r0["mem_mbps"], r0["ssd_mbps"], max(r["run"] for r in rows),
    ", ".join(sorted({"%s %s" % (r["mode"], r["tier_free"]) for r in rows if r["mode"] != "spill"}))))
print("| pattern | config | writer MB/s | later bursts MB/s | failed writes | slowest file s | files on mem / migrated / total |")
print("|---|---|---|---|---|---|---|")
ratios = {}
for (pattern, mode), rs in sorted(cases.items()):
    bw = [r["writer"]["mbps"] for r in rs]
    later = [b["mbps"] for r in rs for b in r["writer"]["bursts"][1:]]
    errs = sum(len(r["writer"]["errors"]) for r in rs)
    slow = [r["writer"]["slowest_file_s"] for r in rs]
    files = "%s / %s / %d" % (spread([r["files_on_mem"] for r in rs], "%d"), spread([r["files_migrated"] for r in rs], "%d"),
                             rs[0]["writer"]["files"])
    ratios[(pattern, mode)] = statistics.median(bw)
    print("| %s | %s | %s | %s | %d | %s | %s |" % (pattern, mode, spread(bw), spread(later) if later else "-", errs,
                                                   spread(slow, "%.2f"), files))
print()
for pattern in sorted({p for p, _ in cases}):
    for mode in ("onfs", "onfs-burst"):
        if (pattern, mode) in ratios and (pattern, "spill") in ratios:
            print("- %s: %s/spill writer bandwidth %.2f×" % (pattern, mode, ratios[(pattern, mode)] / ratios[(pattern, "spill")]))
print()
for (pattern, mode), rs in sorted(cases.items()):
    r = rs[0]
    cap = r["mem_mib"] << 20
    tl = r["timeline"]
    print("**%s, %s, run %d** — mem used (MiB) each second, with the policy's mode (onfs configurations):\n" % (pattern, mode, r["run"]))
    print("```")
    nxt = 0.0
    for t, used, m in tl:
        if t + 1e-9 < nxt:
            continue
        nxt = t + 1.0
        bar = "#" * int(40 * used / cap)
        print("%5.1fs %6.1f %-40s %s" % (t, used / 1048576, bar, m if mode != "spill" else ""))
    print("```\n")
