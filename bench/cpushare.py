"""CPU used by each daemon of a local cluster while a command runs, as a
fraction of one core (where the time of a data-path run goes between
processes; docs/benchmarks.md).

    python3 bench/cpushare.py STATE_DIR "dd if=/dev/zero of=MNT/z bs=1M count=1500 oflag=direct" ...
"""
import os
import subprocess
import sys
import time

from proc import cpu_seconds, daemons


def cpu(pids):
    return {name: cpu_seconds(pid)[0] for name, pid in pids.items()}


def main(state, cmds):
    pids = daemons(os.path.join(state, "cluster.json"))
    for cmd in cmds:
        a, t = cpu(pids), time.time()
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        el, b = time.time() - t, cpu(pids)
        print(cmd)
        print("  " + (r.stderr.strip().splitlines() or [""])[-1])
        print("  " + ", ".join(f"{n} {(b[n] - a[n]) / el:.2f}" for n in a if b[n] - a[n] > 0.01))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
