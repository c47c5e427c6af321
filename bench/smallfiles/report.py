"""Summarises bench/smallfiles/run.sh: medians (and spread) of each phase's
rate per target, the ratio sluice/passthrough, and the requests one
operation costs at each hop.

    python3 bench/smallfiles/report.py bench/results/smallfiles
    python3 bench/smallfiles/report.py --check DIR   # the smoke run's figures are sane
"""
import collections
import json
import statistics
import sys

check = sys.argv[1] == "--check"
out = sys.argv[-1]
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
    if check:
        sys.exit("smallfiles check failed: no counts.json")
    sys.exit()
if check:
    bad = []
    for ph in ["create", "stat", "read", "unlink", "mkdir", "rmdir", "tree-create", "tree-remove"]:
        for t in ["passthrough", "sluice"]:
            v = rates.get(ph, {}).get(t)
            if not v or min(v) <= 0:
                bad.append(f"{t} {ph}: {v}")
        c = counts.get(ph, {})
        fuse = sum(v for k, v in c.items() if k.startswith("fuse:"))
        if not 1 <= fuse <= 20:
            bad.append(f"{ph}: {fuse} FUSE requests per operation")
    # a file read reads its bytes: from a data server, or (an owned
    # file) from the mount, which then answers the open and the reads
    rd = counts.get("read", {})
    if sum(v for k, v in rd.items() if k.startswith("data:")) < 0.9 and rd.get("mount:owned", 0) < 2.9:
        bad.append(f"read: neither a data server request nor the mount's answers per file read ({rd})")
    if bad:
        sys.exit("smallfiles check failed:\n  " + "\n  ".join(bad))
    print("smallfiles check: every phase measured on both targets, requests counted")
print()
print("Requests per operation (FUSE: sent by the kernel to the mount; owned: of those, opens and reads of owned files the mount answered")
print("from the bytes it keeps; fwd, meta, data: served by that daemon):")
print()
print("| phase | FUSE | owned | fwd | meta | data |")
print("|---|---|---|---|---|---|")
for ph, c in counts.items():
    cols = []
    for hop in ["fuse", "mount", "fwd", "meta", "data"]:
        if hop == "mount":
            cols.append(f"{c.get('mount:owned', 0):.2f}")
            continue
        items = [(k.split(":", 1)[1], v) for k, v in c.items() if k.startswith(hop + ":")]
        total = sum(v for _, v in items)
        detail = ", ".join(f"{op} {v:g}" for op, v in sorted(items, key=lambda x: -x[1]) if v >= 0.05)
        cols.append(f"{total:.2f} ({detail})" if items else "0")
    print(f"| {ph} | " + " | ".join(cols) + " |")
