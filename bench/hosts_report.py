#!/usr/bin/env python3
"""Medians (and ranges) of results run through bench/ab.sh with several
sides (bench/results/hosts/), as ratios to the first side:
bench/smallfiles/run.sh's (each mdtest phase's rate and the CPU per
operation of every process on the path: daemons, etcd members, mount)
or bench/streams.sh's (MB/s and CPU seconds per GB of each phase and
stream count).

    python3 bench/hosts_report.py bench/results/hosts/smallfiles-20261207.jsonl
    python3 bench/hosts_report.py bench/results/hosts/streams-20261207.jsonl
"""
import json
import statistics as st
import sys

PHASES = ["create", "stat", "read", "unlink", "mkdir", "rmdir", "tree-create", "tree-remove"]


def fmt(vals):
    m = st.median(vals)
    return "%.0f (%.0f–%.0f)" % (m, min(vals), max(vals))


def streams(rows, sides):
    base = sides[0]
    print("| streams, phase | " + " | ".join(sides) + " |")
    print("|---" * (len(sides) + 1) + "|")
    for k in sorted({(r["streams"], r["phase"]) for r in rows}):
        cells = []
        for s in sides:
            rs = [r for r in rows if r["side"] == s and (r["streams"], r["phase"]) == k]
            mbps = [r["mbps"] for r in rs]
            cpu = st.median([sum(r["cpu_s"].values()) / (r["bytes"] / 1e9) for r in rs])
            bm = st.median([r["mbps"] for r in rows if r["side"] == base and (r["streams"], r["phase"]) == k])
            cells.append("%s MB/s%s, %.2f CPU s/GB" % (fmt(mbps), "" if s == base else " ×%.2f" % (st.median(mbps) / bm), cpu))
        print("| %d, %s | %s |" % (k[0], k[1], " | ".join(cells)))


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rows = [r for r in rows if r["target"] == "sluice"]
    if rows and "streams" in rows[0]:
        sides = []
        for r in rows:
            if r["side"] not in sides:
                sides.append(r["side"])
        return streams(rows, sides)
    sides = []
    for r in rows:
        if r["side"] not in sides:
            sides.append(r["side"])
    by = {s: [r for r in rows if r["side"] == s] for s in sides}
    base = sides[0]
    print("| side | " + " | ".join(PHASES) + " | CPU µs/op |")
    print("|---" * (len(PHASES) + 2) + "|")
    for s in sides:
        cells = []
        for p in PHASES:
            vals = [r["rates"][p] for r in by[s]]
            ratio = st.median(vals) / st.median([r["rates"][p] for r in by[base]])
            cells.append(fmt(vals) + ("" if s == base else " ×%.2f" % ratio))
        cpu = [1e6 * r["cpu_s"] / r["ops"] for r in by[s]]
        bcpu = st.median([1e6 * r["cpu_s"] / r["ops"] for r in by[base]])
        cells.append(fmt(cpu) + ("" if s == base else " ×%.2f" % (st.median(cpu) / bcpu)))
        print("| %s (%d runs) | %s |" % (s, len(by[s]), " | ".join(cells)))


if __name__ == "__main__":
    main(sys.argv[1])
