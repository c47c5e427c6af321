#!/usr/bin/env python3
"""Samples the mem tier's usage from `sluice cluster status` every INTERVAL seconds
until the file STOP exists; prints one JSON list of [seconds, used bytes,
mode of the first mem server].

    sample.py SLUICE STATE_DIR INTERVAL STOP
"""
import json
import os
import re
import subprocess
import sys
import time

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
sluice, state, interval, stop = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
t0 = time.monotonic()
out = []
while not os.path.exists(stop):
    t = time.monotonic() - t0
    st = subprocess.run([sluice, "cluster", "status", "--dir", state], capture_output=True, text=True).stdout
    used, mode, memid = 0, "", None
    for line in st.splitlines():
        f = line.split()
        if len(f) > 7 and f[1] == "data" and f[2] == "mem":
            memid = memid or f[0]
            m = re.match(r"\s*\S+\s+data\s+mem\s+\S+\s+\S+\s+\S+ \S+\s+([\d.]+) (\S+)", line)
            if m:
                used += int(float(m.group(1)) * UNITS[m.group(2)])
        elif memid and len(f) > 1 and f[0] == memid and f[1] in ("calm", "normal-out", "forced-out", "stall-writes"):
            mode = f[1]
    out.append([round(t, 2), used, mode])
    time.sleep(interval)
json.dump(out, sys.stdout)
print()
