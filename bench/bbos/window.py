#!/usr/bin/env python3
"""bench/bbos/window.sh's checkpoints, per write-behind window: the median
time (min-max) of a checkpoint, every round's files together, beside what
the 160 MB/s device alone takes.

    python3 bench/bbos/window.py [bench/bbos/window-results.jsonl] [--check]
"""
import json, statistics, sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
rows = [json.loads(l) for l in open(args[0] if args else "bench/bbos/window-results.jsonl") if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["window"], []).append(r)
size = lambda w: float(w[:-1]) * {"K": 1 / 1024, "M": 1, "G": 1024}[w[-1]]
print("| window | checkpoints | ms per %d MiB checkpoint: median (min–max) | × the device alone (%.1f ms at 160 MB/s) |" % (rows[0]["mib"], (rows[0]["mib"] << 20) / 160e6 * 1e3))
print("|---|---|---|---|")
alone = (rows[0]["mib"] << 20) / 160e6
for w in sorted(by, key=size):
    s = sorted(r["secs"] for r in by[w])
    m = statistics.median(s)
    print("| %s | %d | %.1f (%.1f–%.1f) | %.2f |" % (w, len(s), m * 1e3, s[0] * 1e3, s[-1] * 1e3, m / alone))
if "--check" in sys.argv:
    if not rows or any(r["secs"] <= 0 for r in rows):
        sys.exit("window check failed")
