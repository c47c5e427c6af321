#!/usr/bin/env python3
"""Writes files of FILE_MIB through a mount, in bursts of BURST_MIB separated
by PAUSE seconds, TOTAL_MIB in all; each file is written, fsynced and closed.
Prints one JSON object: per-burst seconds and MB/s, the slowest file, errors.

    writer.py DIR TOTAL_MIB BURST_MIB PAUSE FILE_MIB
"""
import json
import os
import sys
import time

d, total, burst, pause, fmib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
buf = os.urandom(fmib << 20)
res = {"bursts": [], "errors": [], "slowest_file_s": 0.0}
t0 = time.monotonic()
written, n = 0, 0
while written < total:
    b0, bw = time.monotonic(), 0
    while bw < burst and written < total:
        f0 = time.monotonic()
        p = os.path.join(d, "f%04d" % n)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, buf)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            res["errors"].append("%s: %s" % (p, e))
        res["slowest_file_s"] = max(res["slowest_file_s"], time.monotonic() - f0)
        n += 1
        bw += fmib
        written += fmib
    secs = time.monotonic() - b0
    res["bursts"].append({"t": round(b0 - t0, 3), "mib": bw, "secs": round(secs, 3), "mbps": round(bw * 1.048576 / secs, 1)})
    if written < total:
        time.sleep(pause)
res["files"] = n
res["secs"] = round(time.monotonic() - t0, 3)
res["write_secs"] = round(sum(b["secs"] for b in res["bursts"]), 3)
res["mbps"] = round(total * 1.048576 / res["write_secs"], 1)
json.dump(res, sys.stdout)
print()
