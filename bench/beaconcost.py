#!/usr/bin/env python3
"""Beacon's cost per operation, from its parts (bench/beaconcost.sh).

  go test -bench ... | beaconcost.py --bench          → one JSON line per benchmark (median of its runs)
  beaconcost.py --row NAME OPS CPU0 CPU1 RECORDS.jsonl → one JSON line per row of the cluster run
  beaconcost.py RESULTS.jsonl                          → the table

A row's monitoring CPU is (operations each layer recorded) × Add, plus
(records made) × (Ship + Put) per record, where Add is the serial
BenchmarkAdd of the row's kind and Ship and Put the 1000-record windows;
its share is that over the CPU all sluice processes spent on the row."""
import json
import re
import statistics
import sys


def bench():
    runs = {}
    for line in sys.stdin:
        m = re.match(r"^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op\s+([\d.]+) allocs/op)?", line)
        if m:
            runs.setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(4) or 0)))
    for name, rs in runs.items():
        ns = [r[0] for r in rs]
        print(json.dumps({"bench": name, "ns": statistics.median(ns), "min": min(ns), "max": max(ns),
                          "allocs": statistics.median(r[1] for r in rs), "runs": len(rs)}))


def row(name, ops, c0, c1, recs_path):
    adds, recs, by_layer = 0, 0, {}
    with open(recs_path) as f:
        for line in f:
            r = json.loads(line)
            recs += 1
            adds += r["Count"]
            lay = {1: "client", 2: "fwd", 3: "data"}.get(r["Layer"], str(r["Layer"]))
            by_layer[lay] = by_layer.get(lay, 0) + r["Count"]
    print(json.dumps({"row": name, "ops": int(ops), "cpu_s": round(float(c1) - float(c0), 3), "adds": adds,
                      "records": recs, "adds_by_layer": by_layer}))


def kind(name):
    if name.startswith("mdtest"):
        return "meta-create"
    if "4k" in name:
        return "read4k-random"
    return "write1m-seq"


def table(path):
    benches, rows = {}, []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if "bench" in d:
                benches[d["bench"]] = d
            else:
                rows.append(d)
    print("| part | ns (median, min–max) | allocs |")
    print("|---|---|---|")
    for name, d in benches.items():
        print(f"| {name} | {d['ns']:,.0f} ({d['min']:,.0f}–{d['max']:,.0f}) | {d['allocs']:g} |")
    per_rec = benches["BenchmarkShip/records=1000"]["ns"] + benches["BenchmarkPut/records=1000"]["ns"]
    print()
    print("| row | operations | CPU µs per operation (all sluice processes) | layers' Adds per operation | operations per record | monitoring ns per operation | share |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ops = max(r["ops"], 1)
        add = benches[f"BenchmarkAdd/{kind(r['row'])}"]["ns"]
        mon_ns = (r["adds"] * add + r["records"] * per_rec) / ops
        cpu_us = r["cpu_s"] * 1e6 / ops
        share = mon_ns / (cpu_us * 1e3) if cpu_us > 0 else float("nan")
        per_record = r["adds"] / max(r["records"], 1)
        print(f"| {r['row']} | {r['ops']:,} | {cpu_us:,.1f} | {r['adds'] / ops:.2f} | {per_record:,.0f} | {mon_ns:,.0f} | {share:.2%} |")


if __name__ == "__main__":
    if sys.argv[1] == "--bench":
        bench()
    elif sys.argv[1] == "--row":
        row(*sys.argv[2:7])
    else:
        table(sys.argv[1])
