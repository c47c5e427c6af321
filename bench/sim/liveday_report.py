#!/usr/bin/env python3
"""Tables of bench/sim/liveday.sh: per job (median over the runs) the live
and simulated I/O time and wait for its nodes, their agreement by kind
of job, and how far the live runs agree with themselves. A job agrees
when the simulated time is within 15 % of the live one, or within 10 ms
(a job of a few operations takes milliseconds live and next to nothing
in a model of rates). Two simulations of each run: "sim" runs each job
on the nodes it got live but starts it when the simulator's scheduler
does (the schedule and the I/O model together: a job ending a little
earlier or later frees a node for another job earlier or later, and the
jobs that share a forwarding node part from there); "pinned" also starts
each job when it started live, so that it shares its forwarding node
with the jobs it shared it with live (the I/O model alone). --check (the smoke's): every job ran without
error and has both times, the I/O time of all jobs together agrees
within 25 %, at least half the jobs agree (three quarters pinned), and every job that waited
for its nodes more than a second, live or simulated, waited at least
half as long in the other."""
import statistics
import sys
from collections import defaultdict

from livecommon import agrees, load_args


def main():
    check, rows = load_args()
    by = defaultdict(list)
    for r in rows:
        by[r["id"]].append(r)
    jobs = []
    for i, rs in by.items():
        jobs.append({"id": i, "kind": rs[0]["kind"], "runs": len(rs),
                     "live": statistics.median(r["live"] for r in rs), "sim": statistics.median(r["sim"] for r in rs),
                     "pinned": statistics.median(r.get("pinned", -1) for r in rs),
                     "live_wait": statistics.median(r["live_wait"] for r in rs),
                     "sim_wait": statistics.median(r["sim_wait"] for r in rs),
                     "spread": max(r["live"] for r in rs) / max(1e-9, min(r["live"] for r in rs)),
                     "self": sum(agrees(statistics.median(x["live"] for x in rs), r["live"]) for r in rs)})
    if check:
        bad = [r for r in rows if r["error"] or r["live"] <= 0 or r["sim"] < 0]
        if bad:
            sys.exit("liveday check: %d jobs without an error-free live and simulated time: %s" % (len(bad), bad[:3]))
        lt, st = sum(j["live"] for j in jobs), sum(j["sim"] for j in jobs)
        if abs(st - lt) > 0.25 * lt:
            sys.exit("liveday check: all jobs' I/O time live %.1f s, simulated %.1f s" % (lt, st))
        n = sum(agrees(j["live"], j["sim"]) for j in jobs)
        if n < len(jobs) / 2:
            sys.exit("liveday check: %d of %d jobs agree within 15 %% or 10 ms" % (n, len(jobs)))
        np = sum(agrees(j["live"], j["pinned"]) for j in jobs)
        if np < 0.75 * len(jobs):
            sys.exit("liveday check: pinned to their live starts, %d of %d jobs agree within 15 %% or 10 ms" % (np, len(jobs)))
        w = [j for j in jobs if j["live_wait"] > 1 and j["sim_wait"] < 0.5 * j["live_wait"]]
        if w:
            sys.exit("liveday check: jobs waited live for their nodes but not in the simulator: %s" % w[:3])
        w = [j for j in jobs if j["sim_wait"] > 1 and j["live_wait"] < 0.5 * j["sim_wait"]]
        if w:
            sys.exit("liveday check: jobs waited in the simulator for their nodes but not live: %s" % w[:3])
        print("liveday check: %d jobs, I/O time in all live %.1f s, simulated %.1f s, %d agree, %d pinned" % (len(jobs), lt, st, n, np))
        return
    runs = max(j["runs"] for j in jobs)
    print("%d jobs, %d run(s); medians over the runs" % (len(jobs), runs))
    print()
    print("| kind | jobs | live I/O time s, in all | simulated | agree (15 % or 10 ms) | within 15 % | median sim/live "
          "| pinned: simulated | agree | within 15 % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    kinds = defaultdict(list)
    for j in jobs:
        kinds[j["kind"]].append(j)
    for k in sorted(kinds) + ["all"]:
        js = jobs if k == "all" else kinds[k]
        print("| %s | %d | %.2f | %.2f | %d | %d | %.2f | %.2f | %d | %d |" % (
            k, len(js), sum(j["live"] for j in js), sum(j["sim"] for j in js),
            sum(agrees(j["live"], j["sim"]) for j in js), sum(abs(j["sim"] - j["live"]) <= 0.15 * j["live"] for j in js),
            statistics.median(j["sim"] / j["live"] for j in js if j["live"] > 0),
            sum(j["pinned"] for j in js), sum(agrees(j["live"], j["pinned"]) for j in js),
            sum(abs(j["pinned"] - j["live"]) <= 0.15 * j["live"] for j in js)))
    w = [j for j in jobs if j["live_wait"] > 0.1 or j["sim_wait"] > 0.1]
    print()
    print("jobs that waited for their nodes (over 0.1 s, live or simulated): %d; their wait live %.1f s in all, simulated %.1f s; "
          "within 15 %% or 0.5 s: %d" % (len(w), sum(j["live_wait"] for j in w), sum(j["sim_wait"] for j in w),
                                          sum(abs(j["sim_wait"] - j["live_wait"]) <= max(0.15 * j["live_wait"], 0.5) for j in w)))
    if runs > 1:
        n = sum(j["self"] for j in jobs)
        t = sum(j["runs"] for j in jobs)
        print("the live runs against themselves: a job's run within 15 %% or 10 ms of its median over the runs: %d of %d; "
              "spread (slowest/fastest run) median %.2f, max %.2f" % (n, t, statistics.median(j["spread"] for j in jobs),
                                                                     max(j["spread"] for j in jobs)))


main()
