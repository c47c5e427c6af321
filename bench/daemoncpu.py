#!/usr/bin/env python3
"""CPU seconds (user + system) used so far by the daemons of a local
cluster: bench/daemoncpu.py STATE_DIR/cluster.json. Benchmarks read it
before and after a phase (bench/ab.sh, bench/monitor-ab.sh): CPU per
operation is far less disturbed by this VM's noise than rates are.
With --each, one name=seconds per daemon instead of the total
(bench/gomaxprocs-ab.sh)."""
import json
import os
import sys

each = "--each" in sys.argv[1:]
path = [a for a in sys.argv[1:] if a != "--each"][0]
total, out = 0.0, []
for d in json.load(open(path))["Daemons"]:
    try:
        with open(f"/proc/{d['Pid']}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, KeyError):
        s = 0.0
    total += s
    out.append(f"{d['Name']}={s}")
print(" ".join(out) if each else round(total, 3))
