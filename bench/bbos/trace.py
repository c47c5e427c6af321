#!/usr/bin/env python3
"""What the buffer's data server saw in runs made with TRACE=1
(bench/bbos/run.sh: each checkpoint write's and each demotion read's
arrival and end, "Writes" and "Reads", µs from the run's start).

    python3 bench/bbos/trace.py bench/bbos/results-dedicated-trace.jsonl.gz
    python3 bench/bbos/trace.py bench/bbos/results-fifo-trace.jsonl.gz

Per run: how an 8 MiB checkpoint's 1 MiB writes reach the server (how
many arrive before the first of them ends, and how many in each later
batch: a fresh chunk's other writes wait for its first, fwd
chunkForWrite), and, where demotion read the buffer, the checkpoints'
time by how many demotion reads overlapped their writes (median ms).
"""
import collections
import gzip
import json
import statistics
import sys


def batches(ws):
    """The checkpoint's writes in arrival batches (a gap of 0.5 ms or more
    parts them); its first batch is what arrives before any has ended."""
    ws = sorted(ws, key=lambda w: w[2])
    out, last = [], None
    for w in ws:
        if last is None or w[2] - last >= 500:
            out.append(0)
        out[-1] += 1
        last = w[2]
    return tuple(out)


def main(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        runs = [json.loads(line) for line in f]
    for r in runs:
        writes = r.get("Writes") or []
        if not writes:
            continue
        name = "%s %s %.2f S %s, MTBF up to %d min, run %d" % (r["exp"], r["label"], r["Mix"]["DWPP"], r["Mix"]["Congestion"], r["mtbf_minutes"], r["run"])
        by_ck = collections.defaultdict(list)
        cks = r["Checkpoint"]
        for w in writes:
            app = w[0].removeprefix("bb-")
            for c in cks:
                if c["App"] == app and c["Start"] * 1e6 - 1e4 <= w[2] <= c["End"] * 1e6 + 1e4:
                    by_ck[(app, c["Version"])].append(w)
                    break
        pat = collections.Counter(batches(ws) for ws in by_ck.values())
        print(name)
        print("  write batches per checkpoint (count):", ", ".join("%s: %d" % ("+".join(map(str, k)), n) for k, n in pat.most_common(4)))
        reads = r.get("Reads") or []
        if reads:
            by_n = collections.defaultdict(list)
            for c in cks:
                n = sum(1 for d in reads if d[3] > c["Start"] * 1e6 and d[2] < c["End"] * 1e6)
                by_n[min(n, 5)].append((c["End"] - c["Start"]) * 1e3)
            print("  checkpoint ms by demotion reads overlapping:", ", ".join(
                "%d%s: %.1f (%d)" % (n, "+" if n == 5 else "", statistics.median(v), len(v)) for n, v in sorted(by_n.items())))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
