"""Summarises bench/smallfiles/run.sh: medians (and spread) of each phase's
rate per target, the ratio sluice/passthrough, and the requests one
operation costs at each hop.

    python3 bench/smallfiles/report.py bench/results/smallfiles
"""
import collections
import json
import statistics
import sys

out = sys.argv[1]
rates = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(out + "/rates.jsonl"):
    r = json.loads(line)
    for ph, v in r["rates"].items():
        rates[ph][r["target"]].append(v)
print("| phase | passthrough ops/s | sluice ops/s | sluice/passthrough |")
print("|---|---|---|---|")
for ph in ["create", "stat", "read", "unlink", "mkdir", "rmdir", "tree-create", "tree-remove"]:
    if ph not in rates:
        continue
    pt, sl = rates[ph]["passthrough"], rates[ph]["sluice"]
    m = lambda v: "%s (%s–%s)" % (f"{statistics.median(v):,.0f}", f"{min(v):,.0f}", f"{max(v):,.0f}")
    print(f"| {ph} | {m(pt)} | {m(sl)} | {statistics.median(sl) / statistics.median(pt):.2f} |")
try:
    counts = json.load(open(out + "/counts.json"))
except FileNotFoundError:
    sys.exit()
print()
print("Requests per operation (FUSE: sent by the kernel to the mount; fwd, meta, data: served by that daemon):")
print()
print("| phase | FUSE | fwd | meta | data |")
print("|---|---|---|---|---|")
for ph, c in counts.items():
    cols = []
    for hop in ["fuse", "fwd", "meta", "data"]:
        items = [(k.split(":", 1)[1], v) for k, v in c.items() if k.startswith(hop + ":")]
        total = sum(v for _, v in items)
        detail = ", ".join(f"{op} {v:g}" for op, v in sorted(items, key=lambda x: -x[1]) if v >= 0.05)
        cols.append(f"{total:.2f} ({detail})" if items else "0")
    print(f"| {ph} | " + " | ".join(cols) + " |")
