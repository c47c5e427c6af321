#!/usr/bin/env python3
"""Where a small file's create waits, call by call (docs/benchmarks.md,
"A small file's life in the service"): N times open(O_CREAT|O_EXCL),
write BYTES, close in a new directory DIR; prints the mean microseconds of
each call.

    python3 bench/smallfiles/calltimes.py MOUNT/dir [N] [BYTES]
"""
import os
import sys
import time


def main():
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    os.makedirs(d)
    buf = b"x" * size
    t = {"open": 0.0, "write": 0.0, "close": 0.0}
    for i in range(n):
        a = time.perf_counter()
        fd = os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        b = time.perf_counter()
        os.write(fd, buf)
        c = time.perf_counter()
        os.close(fd)
        e = time.perf_counter()
        t["open"] += b - a
        t["write"] += c - b
        t["close"] += e - c
    print(" ".join("%s %.0f" % (k, v / n * 1e6) for k, v in t.items()), "µs per call,", n, "files of", size, "bytes")


if __name__ == "__main__":
    main()
