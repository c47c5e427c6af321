#!/usr/bin/env python3
"""Tables of the placement experiment (bench/placement/run.sh).

  report.py RESULTS.jsonl            the tables of docs/experiments/placement.md
  report.py --check RESULTS.jsonl    fail unless the figures are present and
                                     sane (CI's placement-smoke)

Per policy and N: the job's aggregate bandwidth as a share of the pool's
sum of max_perf (median of the runs, with min-max), the spread of rank
times (slowest / fastest), and how the bytes were spread against the
servers' max_perf (the largest over- or under-share of any server).
"""
import json
import statistics
import sys


def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def share(r):
    return r["mbps"] / sum(r["caps"])


def skew(r):
    """Largest |bytes share − max_perf share| of any server, in points."""
    perf = r["maxperf"]  # by server id (the caps are in start order, not id order)
    total = sum(r["placed"].values()) or 1
    return max(abs(r["placed"].get(k, 0) / total - p / sum(perf.values())) for k, p in perf.items()) * 100


def chunk_of(r):
    return r.get("chunk") or 4 << 20  # runs before the field was kept used 4 MiB


def ceiling(r):
    """The best share of Σcaps any placement of this job's chunks reaches:
    every rank's file cut into chunks, placed largest first where it
    finishes soonest at the caps (LPT; within a chunk of the optimum)."""
    c = chunk_of(r)
    per = r["bytes"] // r["n"]
    units = [c] * (per // c) * r["n"] + ([per % c] * r["n"] if per % c else [])
    load = [0.0] * len(r["caps"])
    for u in sorted(units, reverse=True):
        i = min(range(len(load)), key=lambda k: ((load[k] + u) / r["caps"][k], k))
        load[i] += u
    span = max(l / (cap * 1e6) for l, cap in zip(load, r["caps"]))
    return r["bytes"] / span / 1e6 / sum(r["caps"])


def table(rs):
    for c in sorted({chunk_of(r) for r in rs}):
        sel = [r for r in rs if chunk_of(r) == c]
        if len({chunk_of(r) for r in rs}) > 1:
            print("### %d MiB chunks\n" % (c >> 20))
        table1(sel)
        print()


def table1(rs):
    pols = sorted({r["policy"] for r in rs}, key=lambda p: ["perf", "rr", "wrandom"].index(p) if p in ("perf", "rr", "wrandom") else 9)
    ns = sorted({r["n"] for r in rs})
    print("| N | " + " | ".join("%s: share of Σmax_perf (min–max)" % p for p in pols) + " | perf / rr | best placement of these chunks |")
    print("|---|" + "---|" * len(pols) + "---|---|")
    for n in ns:
        cells, med = [], {}
        for p in pols:
            xs = [share(r) for r in rs if r["n"] == n and r["policy"] == p]
            if not xs:
                cells.append("–")
                continue
            med[p] = statistics.median(xs)
            cells.append("%.1f %% (%.1f–%.1f, %d runs)" % (100 * med[p], 100 * min(xs), 100 * max(xs), len(xs)))
        ratio = "%.2f×" % (med["perf"] / med["rr"]) if "perf" in med and "rr" in med else "–"
        best = statistics.median(ceiling(r) for r in rs if r["n"] == n)
        print("| %d | %s | %s | %.1f %% |" % (n, " | ".join(cells), ratio, 100 * best))
    print()
    print("| N | policy | MB/s (median) | rank time slowest/fastest | worst server's bytes share − max_perf share |")
    print("|---|---|---|---|---|")
    for n in ns:
        for p in pols:
            sel = [r for r in rs if r["n"] == n and r["policy"] == p]
            if not sel:
                continue
            print("| %d | %s | %.1f | %.2f | %.1f points |" % (
                n, p, statistics.median(r["mbps"] for r in sel),
                statistics.median(r["slowest"] / max(r["fastest"], 1e-9) for r in sel),
                statistics.median(skew(r) for r in sel)))


def check(rs):
    bad = []
    if not rs:
        bad.append("no results")
    for r in rs:
        if not r["mbps"] > 0 or not r["span"] > 0:
            bad.append("%s N=%d: no bandwidth" % (r["policy"], r["n"]))
        if sum(r["placed"].values()) < 0.99 * r["bytes"]:
            bad.append("%s N=%d: placed %d of %d bytes" % (r["policy"], r["n"], sum(r["placed"].values()), r["bytes"]))
        if any(v <= 0 for v in r["maxperf"].values()):
            bad.append("%s N=%d: a server without a measured max_perf: %s" % (r["policy"], r["n"], r["maxperf"]))
        if share(r) > 1.1:
            bad.append("%s N=%d: %.0f %% of the caps" % (r["policy"], r["n"], 100 * share(r)))
    perf = [share(r) for r in rs if r["policy"] == "perf"]
    rr = [share(r) for r in rs if r["policy"] == "rr"]
    if perf and rr and not statistics.median(perf) > 1.3 * statistics.median(rr):
        bad.append("perf %.0f %% is not clearly ahead of rr %.0f %%" % (100 * statistics.median(perf), 100 * statistics.median(rr)))
    for b in bad:
        print("placement check:", b)
    if bad:
        sys.exit(1)
    print("placement check: %d runs sane" % len(rs))


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--check":
        rs = load(args[1])
        table(rs)
        check(rs)
    else:
        table(load(args[0]))
