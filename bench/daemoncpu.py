#!/usr/bin/env python3
"""CPU seconds (user + system) used so far by the daemons of a local
cluster: bench/daemoncpu.py STATE_DIR/cluster.json. Benchmarks read it
before and after a phase (bench/beaconcost.sh, bench/remote4k.sh): CPU per
operation is far less disturbed by this VM's noise than rates are.
With --each, one name=seconds per daemon instead of the total
(bench/remote4k.sh)."""
import sys

from proc import cpu_seconds, daemons

each = "--each" in sys.argv[1:]
path = [a for a in sys.argv[1:] if a != "--each"][0]
total, out = 0.0, []
for name, pid in daemons(path).items():
    s = cpu_seconds(pid)[0]
    total += s
    out.append(f"{name}={s}")
print(" ".join(out) if each else round(total, 3))
