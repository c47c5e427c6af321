#!/usr/bin/env python3
"""Tables of bench/sim/maintenance.sh: per case and policy, medians over
the days (min-max) of the I/O time of the jobs whose I/O overlapped the
window against the run without maintenance (per job: mean and worst;
the I/O-intensive ones, over 1 GiB on more than one I/O node), the day's I/O-intensive mean
against it, the jobs remapped off the nodes going down, and how the
window's jobs were spread over the forwarding nodes. --check (the
smoke's): every case ran, forwarding nodes going down under running jobs
remapped some, and some job of the window under FFM lost time with half the static
nodes down."""
import json
import statistics
import sys
from collections import defaultdict


def med(xs, f="%.2f"):
    if not xs:
        return "-"
    return (f + " (" + f + "–" + f + ")") % (statistics.median(xs), min(xs), max(xs))


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    base = {(r["day"], r["policy"]): r for r in rows if r["case"] == "base"}
    by = defaultdict(list)
    for r in rows:
        by[(r["case"], r["policy"])].append(r)

    def order(k):
        c, p = k
        n = int(c.split("-")[1]) if "-" in c else 0
        return (c.split("-")[0] != "base", c.split("-")[0], n, p != "ffm")

    print("| case | policy | days | jobs in the window | their I/O time × without, mean | worst | the I/O-intensive ones, mean "
          "| the day's I/O-intensive mean × without | jobs remapped | forwarding nodes per window job | most window jobs on one |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in sorted(by, key=order):
        rs = by[k]
        mean = [statistics.mean(r["window_slowdowns"]) for r in rs if r["window_slowdowns"]]
        worst = [max(r["window_slowdowns"]) for r in rs if r["window_slowdowns"]]
        wi = [statistics.mean(r["window_intensive_slowdowns"]) for r in rs if r["window_intensive_slowdowns"]]
        y = [r["intensive_mean_io_s"] / base[(r["day"], r["policy"])]["intensive_mean_io_s"] for r in rs]
        print("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            k[0], k[1], len(rs), med([r["window_jobs"] for r in rs], "%d"), med(mean), med(worst), med(wi), med(y),
            med([r["remaps"] for r in rs], "%d"), med([r["window_fwds_per_job"] for r in rs], "%.1f"),
            med([r["window_most_on_one_fwd"] for r in rs], "%d")))
    if "--check" in sys.argv:
        bad = []
        cases = {r["case"] for r in rows}
        if not any(c.startswith("fwds-") for c in cases) or not any(c.startswith("targets-") for c in cases):
            bad.append("cases missing: %s" % sorted(cases))
        for r in rows:
            if r["case"] == "base":
                continue
            if not r["changes"]:
                bad.append("%s %s day %d: no change took effect" % (r["case"], r["policy"], r["day"]))
            if r["window_jobs"] == 0:
                bad.append("%s %s day %d: no job in the window" % (r["case"], r["policy"], r["day"]))
        for r in by.get(("fwds-40", "ffm"), []):
            if r["remaps"] == 0:
                bad.append("fwds-40 ffm day %d: no running job remapped" % r["day"])
            if max(r["window_slowdowns"], default=1) <= 1.01:
                bad.append("fwds-40 ffm day %d: no job of the window lost time" % r["day"])
        if bad:
            sys.exit("maintenance check failed:\n  " + "\n  ".join(bad))
        print("maintenance check: every case took effect, a job of the window lost time under FFM with half its nodes down")


main()
