#!/usr/bin/env python3
"""The burst buffer's I/O scheduler phases per checkpoint in stored runs of
bench/bbos/run.sh (the data server's iosched counts, summed by the
manager: `sluice bb status --json`, kept as Final.Pools[0] with each run):
per congestion, policy and DWPP, the median over the runs of phases per
checkpoint, of phases cut short by MaxWait, and of the requests' waits at
the scheduler per checkpoint. One phase per checkpoint is the scheduler's
ideal: each application's checkpoint written in one turn.

    python3 bench/bbos/phases.py bench/bbos/results.jsonl.gz [more.jsonl.gz ...]
"""
import collections, gzip, json, statistics, sys

print("| set | congestion | policy | DWPP (S) | runs | checkpoints | phases per checkpoint, median (min–max) | preempted | waited per checkpoint (s) | window per application (MiB) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    rows = collections.defaultdict(list)
    for line in gzip.open(path, "rt"):
        d = json.loads(line)
        if d.get("exp") != "perf" or d["label"] == "dedicated":
            continue
        p = d["Final"]["Pools"][0]
        n = len(d["Checkpoint"])
        apps = len(d["Mix"]["Apps"])
        w = d.get("window") or 32 << 20
        shared = w <= 32 << 20  # one mount's window shared by every application (APP_WINDOW: 32 MiB each)
        rows[(d["Mix"]["Congestion"], d["label"], round(d["Mix"]["DWPP"], 2))].append(
            (n, p["Phases"] / n, p["Preempted"], p["WaitedTotal"] / 1e9 / n, w / apps / (1 << 20), shared))
    for (cong, pol, dwpp), v in sorted(rows.items()):
        ph = sorted(x[1] for x in v)
        print("| %s | %s | %s | %.2f | %d | %d | %.2f (%.2f–%.2f) | %d | %.3f | %.1f%s |" % (
            path.split("/")[-1], cong, pol, dwpp, len(v), v[0][0], statistics.median(ph), ph[0], ph[-1],
            statistics.median(x[2] for x in v), statistics.median(x[3] for x in v), v[0][4], " (shared)" if v[0][5] else ""))
