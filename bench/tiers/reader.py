#!/usr/bin/env python3
"""Reads files in order (1 MiB reads), each opened, read to the end and
closed; prints one JSON object with the seconds and MB/s.

    reader.py FILE...
"""
import json
import os
import sys
import time

t0 = time.monotonic()
n = 0
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    try:
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            n += len(b)
    finally:
        os.close(fd)
secs = time.monotonic() - t0
json.dump({"files": len(sys.argv) - 1, "bytes": n, "secs": round(secs, 3), "mbps": round(n / 1e6 / secs, 1)}, sys.stdout)
print()
