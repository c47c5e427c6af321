#!/usr/bin/env python3
"""Lock contention and blocking of every daemon, from the mutex and block
profiles bench/streams.sh takes with PROFILE=N (issue 18, goal 2: no lock
or channel may account for more than 5 % of wall time).

    python3 bench/lockprof.py PROFDIR/write-4 [SECONDS] [--check]

Each sample's stack says what kind of wait it is:
  idle       a background loop waiting for its next tick or for work
             (heartbeats, size reports, Beacon's shipper, the profiler)
  remote     a call waiting for another daemon's answer (rpc clientConn.do;
             block profile only: in the mutex profile it is the calls'
             contention for their connection)
  queue      a request waiting at its pipeline class's gate for a worker
             (qosgate: the bound on concurrent work, by design), or an
             application's write waiting for room in the mount's
             write-behind window (its bound)
  contended  everything else: a goroutine waiting for another one of the
             same daemon, on a sync.Mutex (mutex profile: how long holders
             made others wait) or a channel, select or condition variable
             (block profile)
Per daemon and kind, the largest waits as a share of the profile's wall
time (SECONDS, default 8; waits of goroutines running side by side add
up, so a share can pass 100 %). --check fails if any contended site
passes 5 %."""
import os
import re
import subprocess
import sys

IDLE = re.compile(r"member\.\(\*Member\)\.Run|flushLoop|Shipper\)\.Run|net/http|Follower\)\.Watch|feed\)\.watch|"
                  r"\.RunGC|RunSettle|\.Run\.func|manager/|bsvc|monitor\.|time\.Sleep|feed\.go|\(\*FS\)\.follow|"
                  r"go-fuse/v2/fuse\.\(\*Server\)\.loop|readRequest")
REMOTE = re.compile(r"rpc\.\(\*clientConn\)\.do")
QUEUE = re.compile(r"qosgate\.\(\*Gate\)\.Enter|vfs\.\(\*Streams\)\.begin")


def traces(binary, path):
    out = subprocess.run(["go", "tool", "pprof", "-traces", binary, path], capture_output=True, text=True).stdout
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        lines = [l for l in block.splitlines() if l.strip()]
        if not lines:
            continue
        first = lines[0].split()
        value = seconds(first[0])
        frames = [first[1]] + [l.strip() for l in lines[1:]]
        yield value, frames


def seconds(v):
    m = re.match(r"([0-9.]+)(ns|us|µs|ms|s|min|h)?$", v)
    if not m:
        return 0.0
    return float(m.group(1)) * {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600,
                                None: 1}[m.group(2)]


def site(frames):
    """The first frame of sluice's own code (where the wait was made)."""
    for f in frames:
        if "sluice-hpc/sluice" in f:
            return f.replace("github.com/sluice-hpc/sluice/", "")
    return frames[0]


def kind(frames, prof):
    stack = "\n".join(frames)
    if "sluice-hpc/sluice" not in stack:
        return "idle"  # the runtime's or a library's own goroutines
    if prof == "block" and REMOTE.search(stack):
        return "remote"
    if QUEUE.search(stack):
        return "queue"
    if IDLE.search(stack):
        return "idle"
    return "contended"


def main(argv):
    check = "--check" in argv
    argv = [a for a in argv if a != "--check"]
    d = argv[0]
    secs = float(argv[1]) if len(argv) > 1 else 8.0
    binary = os.environ.get("SLUICE_BIN", "bin/sluice")
    bad = []
    for f in sorted(os.listdir(d)):
        m = re.match(r"(.+)\.(mutex|block)\.pb\.gz$", f)
        if not m:
            continue
        name, prof = m.groups()
        by = {}
        for v, frames in traces(binary, os.path.join(d, f)):
            k = (kind(frames, prof), site(frames))
            by[k] = by.get(k, 0.0) + v
        for kd in ("contended", "queue", "remote", "idle"):
            items = sorted(((v, s) for (k, s), v in by.items() if k == kd), reverse=True)
            if kd == "contended" or items:
                print(f"{name:10} {prof:5} {kd:9} " +
                      (", ".join(f"{s} {100 * v / secs:.1f} %" for v, s in items[:3]) or "none"))
            if kd == "contended":
                bad += [f"{name} {prof}: {s} {100 * v / secs:.1f} %" for v, s in items if v / secs > 0.05]
    if bad:
        print("contended over 5 % of wall time:", *bad, sep="\n  ")
        return 1 if check else 0
    print("no contended lock or channel over 5 % of wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
