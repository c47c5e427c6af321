#!/usr/bin/env python3
"""Tables of bench/before-after.sh: per row, the old build's and this
one's MB/s (or ops/s), ratio to the passthrough of the same round and CPU
seconds per GB over every sluice process, medians (min-max).

    python3 bench/before_after.py STREAMS.jsonl SMALL.jsonl   (bench/ab.sh's tagged files,
                                                            sides "old" and "new"; SMALL may be a
                                                            directory of BUILD-N/rates.jsonl)
"""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from streams import fmt as streams_fmt, med, role  # noqa: E402  (as streams.py counts and prints them)


def fmt(xs, digits=0):
    return streams_fmt(med(xs), digits)


def streams(path):
    rows = [json.loads(line) for line in open(path)]
    rows = [r for r in rows if not r.get("profiled")]
    # a round: one streams.sh invocation's sluice run and the passthrough's
    # beside it (same up label, same phase and streams, in file order)
    cells = {}
    for r in rows:
        up = r.get("up", "")
        if "side" in r:  # bench/ab.sh's tagged lines
            build = r["side"]
        else:
            build = "old" if "bin=" in up else "new" if up == "" else None
        if build is None:
            continue  # other flags (an A/B in the same file)
        key = (build, r["phase"], r["streams"])
        cells.setdefault(key, {"passthrough": [], "sluice": []})[r["target"]].append(r)
    print("| phase | streams | old MB/s | old / passthrough | old CPU s/GB | new MB/s | new / passthrough | new CPU s/GB | passthrough CPU s/GB (old's rounds, new's) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for phase in ("new", "overwrite", "read"):
        for n in sorted({k[2] for k in cells}):
            out = []
            pcpu = []
            for build in ("old", "new"):
                c = cells.get((build, phase, n))
                if not c:
                    out += ["-"] * 3
                    continue
                sl, pt = c["sluice"], c["passthrough"]
                out.append(fmt([r["mbps"] for r in sl]))
                out.append(fmt([s["mbps"] / p["mbps"] for s, p in zip(sl, pt)], 2))
                out.append(fmt([sum(r["cpu_s"].values()) / (r["bytes"] / 1e9) for r in sl], 2))
                pcpu.append(fmt([sum(r["cpu_s"].values()) / (r["bytes"] / 1e9) for r in pt], 2))
            print(f"| {phase} | {n} | " + " | ".join(out) + " | " + "; ".join(pcpu) + " |")
    # each process's share of the CPU per GB (medians)
    print()
    print("| phase | streams | old: mount, fwd, data, meta CPU s/GB | new: mount, fwd, data, meta |")
    print("|---|---|---|---|")
    for phase in ("new", "overwrite", "read"):
        for n in sorted({k[2] for k in cells}):
            out = []
            for build in ("old", "new"):
                c = cells.get((build, phase, n))
                if not c:
                    out.append("-")
                    continue
                shares = []
                for kind in ("mount", "fwd", "data", "meta"):
                    xs = [sum(v for k, v in r["cpu_s"].items() if role(k) == kind) / (r["bytes"] / 1e9) for r in c["sluice"]]
                    shares.append(f"{statistics.median(xs):.2f}")
                out.append(", ".join(shares))
            print(f"| {phase} | {n} | " + " | ".join(out) + " |")


def small_rounds(d):
    """(build, rows of one round) for bench/ab.sh's tagged file d or a
    directory of BUILD-N/rates.jsonl (the runs before bench/ab.sh)."""
    if os.path.isfile(d):
        by = {}
        for line in open(d):
            r = json.loads(line)
            by.setdefault((r["side"], r["ab_round"]), []).append(r)
        for (build, _), rows in sorted(by.items()):
            yield build, rows
        return
    for build in ("old", "new"):
        for f in sorted(glob.glob(f"{d}/{build}-*/rates.jsonl")):
            yield build, [json.loads(line) for line in open(f)]


def small(d):
    res = {}
    for build, rows in small_rounds(d):
        pt = next(r for r in rows if r["target"] == "passthrough")["rates"]
        sl = next(r for r in rows if r["target"] == "sluice")["rates"]
        for ph, v in sl.items():
            res.setdefault((build, ph), []).append((v, v / pt[ph]))
    print("| phase | old ops/s | old / passthrough | new ops/s | new / passthrough |")
    print("|---|---|---|---|---|")
    for ph in ("create", "stat", "read", "unlink", "mkdir", "rmdir", "tree-create", "tree-remove"):
        o, n = res.get(("old", ph)), res.get(("new", ph))
        if not o or not n:
            continue
        print(f"| {ph} | {fmt([x[0] for x in o])} | {fmt([x[1] for x in o], 2)} | {fmt([x[0] for x in n])} | {fmt([x[1] for x in n], 2)} |")


if __name__ == "__main__":
    streams(sys.argv[1])
    print()
    small(sys.argv[2])
