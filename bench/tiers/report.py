#!/usr/bin/env python3
"""Summarises the tiering experiments' raw results as Markdown
(docs/experiments/tiers.md); every figure is the median over runs with the
range in brackets.

    report.py threshold bench/tiers/threshold.jsonl
        per pattern and configuration the writer's bandwidth, the bursts
        after the first, failed writes, the slowest file, where the files
        ended; then the mem tier's usage timeline of each case's first run
    report.py prefetch bench/tiers/prefetch.jsonl
        read bandwidth per case, speed-up over hdd in the same run, its
        share of the tiers' cap ratio, the wait before reading
    report.py checkpoint bench/tiers/checkpoint.jsonl
        checkpoint bandwidth, restart read bandwidth, restart bytes from mem
    report.py replicas bench/tiers/replicas.jsonl
        write and read bandwidth with one and two copies, their ratio in
        the same run, and the reads across a kill -9 of a mem server
"""
import json
import statistics
import sys
from collections import defaultdict


def spread(xs, fmt="%.1f"):
    if not xs:
        return "-"
    m = statistics.median(xs)
    return (fmt % m) + " (" + (fmt % min(xs)) + "–" + (fmt % max(xs)) + ")"


def by_mode(rows):
    by = defaultdict(list)
    for r in rows:
        by[r["mode"]].append(r)
    return by


def threshold(rows):
    cases = defaultdict(list)
    for r in rows:
        cases[(r["pattern"], r["mode"])].append(r)
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


def prefetch(rows):
    by = by_mode(rows)
    hdd = {r["run"]: r["mbps"] for r in by["hdd"]}
    r0 = rows[0]
    ratio = r0["mem_mbps"] / r0["hdd_mbps"]
    print("\n%d files read in order; hdd tier at %.0f MB/s, mem tier at %.0f MB/s (ratio %.1f); %d runs\n" % (
        r0["files"], r0["hdd_mbps"], r0["mem_mbps"], ratio, len(hdd)))
    print("| case | read MB/s | speed-up over hdd | of the tier ratio | wait before reading s |")
    print("|---|---|---|---|---|")
    for mode in ("hdd", "prefetch", "mem"):
        rs = by.get(mode, [])
        sp = [r["mbps"] / hdd[r["run"]] for r in rs]
        print("| %s | %s | %s | %s | %s |" % (mode, spread([r["mbps"] for r in rs]), spread(sp, "%.2f×"),
                                              spread([s / ratio * 100 for s in sp], "%.0f%%"),
                                              spread([r["wait_secs"] for r in rs], "%.2f")))


def checkpoint(rows):
    r0 = rows[0]
    print("\n5 checkpoint versions of %d MiB through a %d MiB mem tier (%.0f MB/s) over ssd (%.0f MB/s); %d runs\n" % (
        3 * r0["mem_mib"] // 4, r0["mem_mib"], r0["mem_mbps"], r0["ssd_mbps"], max(r["run"] for r in rows)))
    print("| config | checkpoint 1 MB/s | checkpoints 2–5 MB/s | restart read MB/s | restart bytes from mem |")
    print("|---|---|---|---|---|")
    for mode, rs in sorted(by_mode(rows).items()):
        share = [100 * r["read_tiers"].get("mem", 0) / max(1, sum(r["read_tiers"].values())) for r in rs]
        print("| %s | %s | %s | %s | %s |" % (mode, spread([r["writer"]["bursts"][0]["mbps"] for r in rs]),
                                              spread([b["mbps"] for r in rs for b in r["writer"]["bursts"][1:]]),
                                              spread([r["restart"]["mbps"] for r in rs]), spread(share, "%.0f%%")))


def replicas(rows):
    runs = sorted({r["run"] for r in rows})
    print("\n2 × 64 MiB written and read back (fio, bs 1 MiB, O_DIRECT) on 3 mem servers; %d runs\n" % len(runs))
    print("| copies | write MB/s | read MB/s |")
    print("|---|---|---|")
    for c in (1, 2):
        rs = [r for r in rows if r["copies"] == c]
        print("| %d | %s | %s |" % (c, spread([r["write_mbps"] for r in rs]), spread([r["read_mbps"] for r in rs])))
    pair = lambda k: [b[k] / a[k] for run in runs for a in rows if a["run"] == run and a["copies"] == 1
                      for b in rows if b["run"] == run and b["copies"] == 2]
    print("\nsame-run ratio, 2 copies over 1: write %s, read %s" % (spread(pair("write_mbps"), "%.2f"), spread(pair("read_mbps"), "%.2f")))
    fo = [r["failover"] for r in rows if r.get("failover")]
    if fo:
        print("\nreads for 8 s across a kill -9 of a mem server at 2 s: %s errors; slowest read %s ms; %s MB/s" % (
            spread([f["errors"] for f in fo], "%d"), spread([f["max_ms"] for f in fo], "%.0f"), spread([f["read_mbps"] for f in fo])))


kind, path = sys.argv[1], sys.argv[2]
{"threshold": threshold, "prefetch": prefetch, "checkpoint": checkpoint, "replicas": replicas}[kind](
    [json.loads(l) for l in open(path) if l.strip()])
