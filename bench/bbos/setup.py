#!/usr/bin/env python3
"""bench/bbos/setup.sh's files: per way of writing, the median time
(min-max) over every round, and what the replay's checkpoint costs
beside its bytes (dd against the same bytes timed in one process).

    python3 bench/bbos/setup.py [bench/bbos/setup-results.jsonl] [--check]
"""
import json, statistics, sys

args = [a for a in sys.argv[1:] if not a.startswith("--")]
rows = [json.loads(l) for l in open(args[0] if args else "bench/bbos/setup-results.jsonl") if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["way"], []).append(r["secs"])
what = {"empty": "dd of no bytes: start, create, fsync, close",
        "dd": "the replay's checkpoint: dd of %d MiB" % max(r["mib"] for r in rows),
        "inproc": "the same bytes, open file to fsync's end, one process"}
print("| way | files | ms: median (min–max) |")
print("|---|---|---|")
med = {}
for w in ("empty", "dd", "inproc"):
    s = sorted(by.get(w, []))
    if not s:
        continue
    med[w] = statistics.median(s)
    print("| %s | %d | %.1f (%.1f–%.1f) |" % (what[w], len(s), med[w] * 1e3, s[0] * 1e3, s[-1] * 1e3))
if "dd" in med and "inproc" in med:
    print("\nsetup beside the bytes (dd − in one process, medians): %.1f ms" % ((med["dd"] - med["inproc"]) * 1e3))
if "--check" in sys.argv:
    if set(med) != {"empty", "dd", "inproc"} or any(v <= 0 for v in med.values()):
        sys.exit("setup check failed")
