#!/usr/bin/env python3
"""Tables of bench/sim/liveqos.sh: each job's I/O time live (median and
range over the runs) and in the simulator, per case; --check: every job
ran without error and has both times, and in both the capped job (j1)
takes longer the lower its cap, its neighbour on the same forwarding
node (j2) does not take longer, and the third job, on the other
forwarding node, does not change by more than 15 %; with a share of 3
(case share3) j1 takes at least 10 % less time than j1 and j2 take
without a rule (their mean: alike jobs, either may end first), j2 not
less than 85 % of it, j3 within 15 %."""
import json
import statistics
import sys


def load(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by = {}
    for r in rows:
        by.setdefault((r["case"], r["id"]), []).append(r)
    return rows, by


def main():
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    rows, by = load(args[0])
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
    med = {}
    for k, rs in by.items():
        med[k] = (statistics.median(r["live"] for r in rs), statistics.median(r["sim"] for r in rs))
    if check:
        bad = [r for r in rows if r["error"] or r["live"] <= 0 or r["sim"] <= 0]
        if bad:
            sys.exit("liveqos check: %d results without an error-free live and simulated time: %s" % (len(bad), bad[:3]))
        order = [c for c in ("none", "cap10", "cap5") if c in cases]
        for side, i in (("live", 0), ("sim", 1)):
            t = [med[(c, "j1")][i] for c in order]
            if any(b <= a for a, b in zip(t, t[1:])):
                sys.exit("liveqos check: %s: j1's I/O time %s over %s does not grow as its cap falls" % (side, t, order))
            v = [med[(c, "j2")][i] for c in order]
            if any(b > 1.15 * a for a, b in zip(v, v[1:])):
                sys.exit("liveqos check: %s: j2 (j1's neighbour) slowed as j1's cap fell: %s" % (side, v))
            # j3, on the other forwarding node, must not feel j1's cap;
            # it may run faster while j1 is held back (live, on two
            # cores, j1's cap frees CPU: one smoke run had j3 at 1.04,
            # 0.84 and 0.95 s), so only a slower j3 fails
            u = [med[(c, "j3")][i] for c in order]
            if max(u) > 1.15 * u[0]:
                sys.exit("liveqos check: %s: j3 (the other forwarding node) slowed with j1's cap: %s over %s" % (side, u, order))
            if "share3" in cases and "none" in cases:
                # Without a rule j1 and j2 are alike; which of them ends
                # first is chance (live: 1.43 s against 1.63 s at the
                # smoke's size, either way round), so the share is
                # measured against their mean, the fair time.
                fair = (med[("none", "j1")][i] + med[("none", "j2")][i]) / 2
                b = med[("share3", "j1")][i]
                if b > 0.9 * fair:
                    sys.exit("liveqos check: %s: j1 with a share of 3 took %.2f s against %.2f without (j1 and j2's mean)" % (side, b, fair))
                b = med[("share3", "j2")][i]
                if b < 0.85 * fair:
                    sys.exit("liveqos check: %s: j2 beside j1's share of 3 took %.2f s against %.2f (j1 and j2 without a rule): faster" % (side, b, fair))
                a, b = med[("none", "j3")][i], med[("share3", "j3")][i]
                if b > 1.15 * a:
                    sys.exit("liveqos check: %s: j3 slowed with j1's share: %.2f against %.2f" % (side, b, a))
        print("liveqos check: %d results sane" % len(rows))
        return
    print("| case | job | live I/O time s (median, range) | simulator s | sim/live |")
    print("|---|---|---|---|---|")
    ok = n = 0
    for c in cases:
        for j in ("j1", "j2", "j3"):
            rs = by.get((c, j))
            if not rs:
                continue
            lv = [r["live"] for r in rs]
            live, sim = med[(c, j)]
            ratio = sim / live
            print("| %s | %s | %.2f (%.2f–%.2f) | %.2f | %.2f |" % (c, j, live, min(lv), max(lv), sim, ratio))
            for r in rs:
                n += 1
                ok += abs(r["sim"] - r["live"]) <= 0.15 * r["live"]
    print()
    print("per job and run, the simulator within 15 %% of the live I/O time: %d of %d" % (ok, n))


if __name__ == "__main__":
    main()
