"""Tables of bench/dfra/scarce.sh: jobs outnumber forwarding nodes.

    python3 bench/dfra/scarce.py RESULTS [FWDS]            Markdown tables
    python3 bench/dfra/scarce.py --check RESULTS FWDS N    fails unless every
        job of N repeats under both policies has a time, forwarding nodes
        within the FWDS there are, and (DFRA) a recorded decision

A job's slowdown is its I/O time in the mix over its I/O time alone on its
fixed-mapping forwarding node (the FFM alone run): one baseline for both
policies, so a policy that gives a job more nodes alone is not penalised
in the ratio.
"""
import json
import statistics
import sys


def load(path):
    return [json.loads(line) for line in open(path)]


def secs(ns):
    return ns / 1e9


def spread(xs):
    """median [min–max]"""
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}–{max(xs):.2f}]"


def short(reasons):
    return "; ".join(reasons).replace("|", "/")


def report(rows, fwds):
    kinds = []
    for r in rows:
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
    alone = {(r["mode"], r["kind"]): r["slowest_ns"] for r in rows if r["repeat"] == 0}
    repeats = sorted({r["repeat"] for r in rows if r["repeat"] > 0})
    mix = {(r["mode"], r["repeat"], r["kind"]): r for r in rows if r["repeat"] > 0}
    n = len(kinds)
    print(f"\n{n} jobs at once on {fwds} forwarding nodes, {len(repeats)} repeats per policy\n")

    print("### Per job: I/O time in the mix (s), median [min–max] over the repeats\n")
    print("| job | alone, FFM | alone, DFRA | mix, FFM | mix, DFRA | slowdown FFM | slowdown DFRA |")
    print("|---|---|---|---|---|---|---|")
    for k in kinds:
        base = alone[("ffm", k)]
        f = [mix[("ffm", i, k)]["slowest_ns"] for i in repeats]
        d = [mix[("dfra", i, k)]["slowest_ns"] for i in repeats]
        print(f"| {k} | {secs(base):.2f} | {secs(alone[('dfra', k)]):.2f} | {spread([secs(x) for x in f])} | "
              f"{spread([secs(x) for x in d])} | {spread([x / base for x in f])} | {spread([x / base for x in d])} |")

    print("\n### Per repeat: mean and worst slowdown, time until the last job ended\n")
    print("| repeat | FFM mean | FFM worst | DFRA mean | DFRA worst | FFM last job (s) | DFRA last job (s) |")
    print("|---|---|---|---|---|---|---|")
    summary = {m: {"mean": [], "worst": [], "last": []} for m in ("ffm", "dfra")}
    for i in repeats:
        cells = []
        for m in ("ffm", "dfra"):
            s = [mix[(m, i, k)]["slowest_ns"] / alone[("ffm", k)] for k in kinds]
            summary[m]["mean"].append(statistics.mean(s))
            summary[m]["worst"].append(max(s))
            summary[m]["last"].append(max(secs(mix[(m, i, k)]["slowest_ns"]) for k in kinds))
        print(f"| {i} | {summary['ffm']['mean'][-1]:.2f} | {summary['ffm']['worst'][-1]:.2f} | "
              f"{summary['dfra']['mean'][-1]:.2f} | {summary['dfra']['worst'][-1]:.2f} | "
              f"{summary['ffm']['last'][-1]:.2f} | {summary['dfra']['last'][-1]:.2f} |")
    print(f"| median | {spread(summary['ffm']['mean'])} | {spread(summary['ffm']['worst'])} | "
          f"{spread(summary['dfra']['mean'])} | {spread(summary['dfra']['worst'])} | "
          f"{spread(summary['ffm']['last'])} | {spread(summary['dfra']['last'])} |")

    print("\n### What each job got (forwarding nodes it sent requests to; DFRA's decision)\n")
    print("| repeat | job | node | FFM | DFRA | DFRA's reasons |")
    print("|---|---|---|---|---|---|")
    for i in repeats:
        for k in kinds:
            f, d = mix[("ffm", i, k)], mix[("dfra", i, k)]
            ded = " (dedicated)" if d.get("dedicated") else ""
            print(f"| {i} | {k} | {f['node']} | {','.join(f['fwds'])} | {','.join(d['fwds'])}{ded} | "
                  f"{d['policy']}: {short(d['reasons'])} |")


def check(rows, fwds, repeats):
    bad = []
    kinds = sorted({r["kind"] for r in rows})
    got = {(r["mode"], r["repeat"], r["kind"]): r for r in rows}
    for m in ("ffm", "dfra"):
        for i in range(repeats + 1):
            for k in kinds:
                r = got.get((m, i, k))
                if r is None:
                    bad.append(f"{m} repeat {i} {k}: missing")
                    continue
                if r["slowest_ns"] <= 0 or r["bytes"] < 0:
                    bad.append(f"{m} repeat {i} {k}: {r['bytes']} bytes in {r['slowest_ns']} ns")
                if not r["fwds"] or len(r["fwds"]) > fwds:
                    bad.append(f"{m} repeat {i} {k}: forwarding nodes {r['fwds']} (there are {fwds})")
                if i > 0 and m == "dfra" and r["policy"] not in ("dfra", "ffm"):
                    bad.append(f"dfra repeat {i} {k}: no allocation decision recorded ({r['policy']!r})")
    # FFM maps FWD_RATIO nodes to each forwarding node: with as many jobs as
    # FWDS × ratio, every forwarding node must have served some job
    for i in range(1, repeats + 1):
        used = {f for k in kinds if (("ffm", i, k) in got) for f in got[("ffm", i, k)]["fwds"]}
        if len(kinds) >= 2 * fwds and len(used) != fwds:
            bad.append(f"ffm repeat {i}: jobs used {sorted(used)}, not all {fwds} forwarding nodes")
    if bad:
        sys.exit("scarce check failed:\n  " + "\n  ".join(bad))
    print(f"scarce check: {len(kinds)} jobs x {repeats} repeats under both policies, decisions recorded")


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(load(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        report(load(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
