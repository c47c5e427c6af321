"""CPU used by each daemon of a local cluster while a command runs, as a
fraction of one core (where the time of a data-path run goes between
processes; docs/benchmarks.md).

    python3 bench/cpushare.py STATE_DIR "dd if=/dev/zero of=MNT/z bs=1M count=1500 oflag=direct" ...
"""
import json
import os
import subprocess
import sys
import time


def cpu(pids):
    out = {}
    for name, pid in pids.items():
        try:
            f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
            out[name] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            out[name] = 0.0
    return out


def main(state, cmds):
    c = json.load(open(os.path.join(state, "cluster.json")))
    pids = {d["Name"]: d["Pid"] for d in c["Daemons"]}
    for cmd in cmds:
        a, t = cpu(pids), time.time()
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        el, b = time.time() - t, cpu(pids)
        print(cmd)
        print("  " + (r.stderr.strip().splitlines() or [""])[-1])
        print("  " + ", ".join(f"{n} {(b[n] - a[n]) / el:.2f}" for n in a if b[n] - a[n] > 0.01))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
