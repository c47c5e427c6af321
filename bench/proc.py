"""What the benchmark scripts read of a process from /proc: its CPU time
and its memory. Imported by bench/daemoncpu.py and the
Python in bench/streams.sh and bench/randread4.sh (run from the
repository's root, with bench/ on sys.path)."""
import json
import os

_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """(user + system, system) CPU seconds of pid so far; (0, 0) if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return (int(fields[11]) + int(fields[12])) / _TCK, int(fields[12]) / _TCK


def status_kib(pid, field):
    """A /proc/PID/status memory field in KiB (VmRSS, VmHWM...); 0 if absent."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def daemons(cluster_json):
    """{name: pid} of a local cluster's daemons (STATE_DIR/cluster.json)."""
    with open(cluster_json) as f:
        return {d["Name"]: d["Pid"] for d in json.load(f)["Daemons"]}
