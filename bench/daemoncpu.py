#!/usr/bin/env python3
"""CPU seconds (user + system) used so far by the daemons of a local
cluster: bench/daemoncpu.py STATE_DIR/cluster.json. Benchmarks read it
before and after a phase (bench/ab.sh, bench/monitor-ab.sh): CPU per
operation is far less disturbed by this VM's noise than rates are."""
import json
import os
import sys

total = 0.0
for d in json.load(open(sys.argv[1]))["Daemons"]:
    try:
        with open(f"/proc/{d['Pid']}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, KeyError):
        pass
print(round(total, 3))
