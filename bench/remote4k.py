#!/usr/bin/env python3
"""The table of bench/remote4k.sh's results: per side (bench/ab.sh) and phase,
the median throughput (min-max) over the rounds and the median CPU the
sluice processes spent, in all and per process: seconds per GB for the
streams, microseconds per read for the 4 KiB random reader.

    python3 bench/remote4k.py bench/results/ab-remote4k-DATE.jsonl
"""
import json
import statistics
import sys


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    for r in rows:  # the forwarding daemons together (the mount uses one of them)
        cpu = {}
        for p, x in r["cpu_s"].items():
            p = "fwd" if p.startswith("fwd-") else p
            cpu[p] = cpu.get(p, 0) + x
        r["cpu_s"] = cpu
    cases = {}
    for r in rows:
        cases.setdefault((r["phase"], r.get("side", r.get("variant", ""))), []).append(r)
    procs = sorted({p for r in rows for p in r["cpu_s"]})
    print("| phase | side | rate | CPU in all | " + " | ".join(procs) + " |")
    print("|---" * (4 + len(procs)) + "|")
    for phase in ("new", "overwrite", "read", "randread"):
        for variant in dict.fromkeys(side for _, side in cases):
            rs = cases.get((phase, variant))
            if not rs:
                continue
            unit = "IOPS" if phase == "randread" else "MBps"
            # CPU per GB (streams) or µs per read (random reads)
            scale = (lambda r: 1e6 / r["count"]) if phase == "randread" else (lambda r: 1 / r["count"])
            rates = [r[unit] for r in rs]
            total = statistics.median(sum(r["cpu_s"].values()) * scale(r) for r in rs)
            per = [statistics.median(r["cpu_s"].get(p, 0) * scale(r) for r in rs) for p in procs]
            fmt = (lambda x: f"{x:.0f}") if phase == "randread" else (lambda x: f"{x:.2f}")
            print(f"| {phase} | {variant} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) {unit} | "
                  f"{fmt(total)} | " + " | ".join(fmt(x) for x in per) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
