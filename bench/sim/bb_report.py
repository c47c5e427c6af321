#!/usr/bin/env python3
"""Tables of simulator experiment 3 (bench/sim/bb.sh; docs/experiments/sim.md).

  bb_report.py RESULTS.jsonl           the tables
  bb_report.py RESULTS.jsonl --check   fail unless the figures are sane (make test)
"""
import json
import statistics
import sys

POLS = ["dedicated", "maxbw", "maxeff", "lru", "fifo", "bbos"]


def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def cell(xs, fmt="%.2f", scale=1):
    xs = [x * scale for x in xs]
    if not xs:
        return "–"
    if min(xs) == max(xs):
        return fmt % med(xs)
    return (fmt + " (" + fmt + "–" + fmt + ")") % (med(xs), min(xs), max(xs))


def base(r, admit_all=False):
    """The 3a cases: every application once per period, MTBF up to 100 min."""
    return not r.get("classes") and r["mtbf_max_minutes"] >= 99 and r["versions"] and r.get("admit_all", False) == admit_all


def most(rs, m, cong, p, admit_all):
    """The most served per period with no checkpoint late in any run, and its DWPP."""
    sel = [r for r in rs if r["machine"] == m and r["congestion"] == cong and r["policy"] == p and base(r, admit_all)
           and (r["bypass"] or p != "bbos")]
    ok = {}
    for d in sorted({r["dwpp"] for r in sel}):
        runs = [r for r in sel if r["dwpp"] == d]
        if runs and all(r["late"] == 0 for r in runs):
            ok[d] = med([r["served_s"] for r in runs])
    if not ok:
        return None
    d = max(ok, key=lambda k: ok[k])
    return ok[d], d


def utilisation(rs):
    print("| machine | congestion | policy | admitted by the policy: most served, none late (S) | × dedicated | every application run: most served, none late (S) | at DWPP | × dedicated |")
    print("|---|---|---|---|---|---|---|---|")
    for m in sorted({r["machine"] for r in rs}):
        for cong in ("low", "high"):
            own = {p: most(rs, m, cong, p, False) for p in POLS}
            every = {p: most(rs, m, cong, p, True) for p in POLS}
            for p in POLS:
                if not own[p] and not every[p]:
                    continue
                f = lambda x, ref: "%.2f" % (x[0] / ref[0]) if x and ref else "–"
                print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    m, cong, p, "%.2f" % own[p][0] if own[p] else "–", f(own[p], own["dedicated"]),
                    "%.2f" % every[p][0] if every[p] else "–", "%.1f" % every[p][1] if every[p] else "–",
                    f(every[p], own["dedicated"])))


def cases(rs):
    print("| machine | policy | DWPP (S) | congestion | admitted (S) | served (S) | late % | checkpoint s (mean) | failure hits % | demoted (S) | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sel = [r for r in rs if base(r) and (r["bypass"] or r["policy"] != "bbos")]
    keys = sorted({(r["machine"], r["congestion"], r["dwpp"], r["policy"]) for r in sel},
                  key=lambda k: (k[0], k[1], k[2], POLS.index(k[3])))
    for m, cong, d, p in keys:
        g = [r for r in sel if (r["machine"], r["congestion"], r["dwpp"], r["policy"]) == (m, cong, d, p)]
        print("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %d |" % (
            m, p, d, cong, cell([r["admitted_s"] for r in g]), cell([r["served_s"] for r in g]),
            cell([r["late"] for r in g], "%.0f", 100), cell([r["ckpt_mean_s"] for r in g], "%.0f"),
            cell([r["failure_hits"] for r in g], "%.1f", 100), cell([r["demoted"] / r["s"] / 3 for r in g]), len(g)))


def bypass(rs):
    print("| machine | DWPP (S) | demoted per period, no bypass (S) | demoted, bypass (S) | bypassed (S) | demoted −% | failure hits % no bypass | bypass |")
    print("|---|---|---|---|---|---|---|---|")
    for m in sorted({r["machine"] for r in rs}):
        for d in (1.3, 1.6, 1.9):
            g = lambda byp: [r for r in rs if r["machine"] == m and r["policy"] == "bbos" and r["dwpp"] == d and base(r)
                             and r["congestion"] == "low" and r["bypass"] == byp]
            no, yes = g(False), g(True)
            if not no or not yes:
                continue
            dn, dy = med([r["demoted"] / r["s"] / 3 for r in no]), med([r["demoted"] / r["s"] / 3 for r in yes])
            print("| %s | %.1f | %.2f | %.2f | %.2f | %.0f | %s | %s |" % (
                m, d, dn, dy, med([r["bypassed"] / r["s"] / 3 for r in yes]), 100 * (1 - dy / dn),
                cell([r["failure_hits"] for r in no], "%.1f", 100), cell([r["failure_hits"] for r in yes], "%.1f", 100)))


def versions(rs):
    print("| machine | classes (T, T/2, T/3) | bbos, version-aware: failure hits % | bbos, MTBF alone | lru | fifo |")
    print("|---|---|---|---|---|---|")
    for m in sorted({r["machine"] for r in rs}):
        for c in ("1:1,2:1,3:1", "1:5,2:2,3:1"):
            g = lambda p, v: [r["failure_hits"] for r in rs if r["machine"] == m and r.get("classes") == c and r["policy"] == p and r["versions"] == v]
            if not g("bbos", True):
                continue
            print("| %s | %s | %s | %s | %s | %s |" % (m, c.replace("1:", "").replace("2:", "").replace("3:", ""),
                  cell(g("bbos", True), "%.1f", 100), cell(g("bbos", False), "%.1f", 100),
                  cell(g("lru", True), "%.1f", 100), cell(g("fifo", True), "%.1f", 100)))


def restart(rs):
    print("| machine | DWPP (S) | policy | failure hits % | restart hits (of 8) | restart GB/s |")
    print("|---|---|---|---|---|---|")
    for m in sorted({r["machine"] for r in rs}):
        for d in (1.9, 2.1):
            for p in ("bbos", "lru", "fifo"):
                g = [r for r in rs if r["machine"] == m and r["dwpp"] == d and r["policy"] == p and r["mtbf_max_minutes"] < 99 and not r.get("classes")]
                if g:
                    print("| %s | %.1f | %s | %s | %s | %s |" % (m, d, p, cell([r["failure_hits"] for r in g], "%.1f", 100),
                          cell([r["restart_hits"] for r in g], "%.0f"), cell([r["restart_bw"] / 1e9 for r in g], "%.1f")))


def check(rs):
    bad = []
    if not rs:
        bad.append("no runs")
    for r in rs:
        tag = "%s %s %.1f %s" % (r["machine"], r["policy"], r["dwpp"], r["congestion"])
        if r["served_s"] > r["admitted_s"] + 1e-6:
            bad.append(tag + ": served more than admitted")
        if r["policy"] == "dedicated" and r["admitted_s"] > 1.0001:
            bad.append(tag + ": dedicated admitted %.2f S" % r["admitted_s"])
        if r["failures"] and not 0 <= r["failure_hits"] <= 1:
            bad.append(tag + ": failure hits %r" % r["failure_hits"])
    over = [r["served_s"] for r in rs if r["policy"] == "bbos" and r["dwpp"] >= 1.9]
    ded = [r["served_s"] for r in rs if r["policy"] == "dedicated" and r["dwpp"] >= 1.9]
    if over and ded and not med(over) > 1.3 * med(ded):
        bad.append("bbos serves %.2f S, dedicated %.2f" % (med(over), med(ded)))
    for b in bad:
        print("sim bb check:", b)
    if bad:
        sys.exit(1)
    print("sim bb check: %d runs sane" % len(rs))


if __name__ == "__main__":
    rs = load(sys.argv[1])
    if "--check" in sys.argv:
        check(rs)
        sys.exit(0)
    for title, f in (("Buffer utilisation", utilisation), ("Every case", cases), ("Bypass", bypass),
                     ("Version-aware cold data", versions), ("Restarts with MTBF up to 20 minutes", restart)):
        print("### " + title + "\n")
        f(rs)
        print()
