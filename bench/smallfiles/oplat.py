#!/usr/bin/env python3
"""Per-operation latency of creates and unlinks, one process, one
directory: N empty files created (O_CREAT|O_EXCL, close), then removed,
each call timed. Prints one line per phase: median, p99, p99.9, max and
how many took over 1 ms (bench/smallfiles/oplat.sh).

    python3 bench/smallfiles/oplat.py DIR N
"""
import os, sys, time, statistics
d = sys.argv[1]; n = int(sys.argv[2])
os.makedirs(d)
def run(op):
    ts = []
    for i in range(n):
        p = f"{d}/f{i}"
        t = time.perf_counter()
        if op == "create":
            fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644); os.close(fd)
        else:
            os.unlink(p)
        ts.append(time.perf_counter() - t)
    ts.sort()
    return "%s: median %.0f us, p99 %.0f, p99.9 %.0f, max %.0f us, over 1 ms %d" % (op, ts[n//2]*1e6, ts[int(n*.99)]*1e6, ts[int(n*.999)]*1e6, ts[-1]*1e6, sum(1 for x in ts if x > 1e-3))
print(run("create")); time.sleep(0.5); print(run("unlink"))
