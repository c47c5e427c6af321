#!/usr/bin/env python3
"""Table of bench/sim/livetiers.sh: the writer's I/O time live (median and
range over the runs) and in `sluice sim day --machine local` of the same
cluster, per case, and how many runs agree within 15 % or 10 ms.
--check: every run ran without error and has both times; where the job
writes four times the mem tier (over, spill), live and simulated alike
write at the ssd tier's rate, not the mem tier's (its bytes per second
within 0.5-2x the ssd's rate the machine records: the mem tier is full
and what it takes is what moves or spills down), and the simulator's
median is within 25 % of the live one (the bar of the report is 15 %;
the check's is wider for a smoke run of one)."""
import statistics
import sys

from livecommon import agrees, load_args


def main():
    check, rows = load_args()
    cases, by = [], {}
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
        by.setdefault(r["case"], []).append(r)
    if check:
        bad = [r for r in rows if r["error"] or r["live"] <= 0 or r["sim"] <= 0]
        if bad:
            sys.exit("livetiers check: %d runs without an error-free live and simulated time: %s" % (len(bad), bad[:2]))
        for c in ("over", "spill"):
            for r in by.get(c, []):
                ssd = sum(r["storage_bw"])
                for side in ("live", "sim"):
                    rate = r["bytes"] / r[side]
                    if not 0.5 * ssd <= rate <= 2 * ssd:
                        sys.exit("livetiers check: %s run %d %s: %.0f MB/s, the ssd tier %.0f: want within 0.5-2x (the mem tier full)" %
                                 (c, r["run"], side, rate / 1e6, ssd / 1e6))
            if by.get(c):
                lv = statistics.median(r["live"] for r in by[c])
                sm = statistics.median(r["sim"] for r in by[c])
                if abs(sm - lv) > 0.25 * lv:
                    sys.exit("livetiers check: %s: the simulator's %.2f s against %.2f s live: want within 25 %%" % (c, sm, lv))
    print("| case | bytes | runs | live I/O s, median (range) | simulated s, median | sim/live | runs within 15 % or 10 ms |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        rs = by[c]
        lv = [r["live"] for r in rs]
        sm = [r["sim"] for r in rs]
        ml, ms = statistics.median(lv), statistics.median(sm)
        ok = sum(agrees(r["live"], r["sim"]) for r in rs)
        print("| %s | %d MiB | %d | %.2f (%.2f-%.2f) | %.2f | %.2f | %d of %d |" %
              (c, rs[0]["bytes"] >> 20, len(rs), ml, min(lv), max(lv), ms, ms / ml, ok, len(rs)))
    mt = rows[0].get("mem_tier") or {}
    print("\nthe machine's mem tier: %.0f MiB at %.0f MB/s, thresholds %s; the ssd tier %.1f MB/s (as measured)" %
          (mt.get("capacity", 0) / 2**20, mt.get("bw", 0) / 1e6, mt.get("thresholds"), sum(rows[0]["storage_bw"]) / 1e6))


if __name__ == "__main__":
    main()
