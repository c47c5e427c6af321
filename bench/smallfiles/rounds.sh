#!/usr/bin/env bash
# Many small files in one cluster (docs/benchmarks.md, "Small files past
# the owned budget"): ROUNDS rounds of mdtest's create phase, N files of
# BYTES each in a new directory per round, the files of earlier rounds kept.
# Per round: files/s, the CPU microseconds each process spent per file,
# the requests each daemon served per file, by kind, and each daemon's
# resident memory after the round. A rate or cost that
# grows with the files already made shows up as a trend across rounds.
#
#   bash bench/smallfiles/rounds.sh                       # ROUNDS=8 N=10000 BYTES=4096
#   SLUICE_BIN=/tmp/sluice-old OUT=... bash bench/smallfiles/rounds.sh   # another build
#
# Raw lines (JSON, one per round) in OUT (default
# bench/results/smallfiles/rounds.jsonl), labelled with the build.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-8}
N=${N:-10000}
BYTES=${BYTES:-4096}
OUT=${OUT:-bench/results/smallfiles/rounds.jsonl}
BASE=${BASE:-$((21000 + RANDOM % 200 * 10))}
BIN=$(bench_sluice)
bench_tool mdtest >/dev/null
W=$(mktemp -d /tmp/sluice-rounds.XXXXXX)
trap '"$BIN" cluster down --dir "$W/s" >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
"$BIN" cluster up --pprof-base "$BASE" --dir "$W/s" --mem 4G --ssd 0 --pfs none --mount "$W/m" >/dev/null
mkdir -p "$(dirname "$OUT")"
python3 - "$W" "$N" "$BYTES" "$ROUNDS" "$BASE" "$BIN" "$OUT" <<'PY'
import collections, json, os, re, subprocess, sys, time, urllib.request
W, n, nbytes, rounds, base, binary, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
ds = json.load(open(W + "/s/cluster.json"))["Daemons"]
series = {"fwd": "sluice_fwd_requests_total", "meta": "sluice_meta_requests_total", "data": "sluice_data_requests_total"}
hz = os.sysconf("SC_CLK_TCK")
def kind(name):
    return "fwd" if name.startswith("fwd") else "data" if name.startswith("data") else name
def counters():
    c = collections.Counter()
    for i, d in enumerate(ds):
        k = kind(d["Name"])
        st = open("/proc/%d/stat" % d["Pid"]).read().rsplit(")", 1)[1].split()
        c["cpu:" + k] += (int(st[11]) + int(st[12])) / hz
        if k not in series:
            continue
        for l in urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (base + i)).read().decode().splitlines():
            if l.startswith(series[k] + "{"):
                c[k + ":" + re.search(r'op="([^"]*)"', l).group(1)] += float(l.rsplit(" ", 1)[1])
    return c
def rss():
    """Each daemon's resident memory in MiB (the largest of a kind)."""
    m = {}
    for d in ds:
        for l in open("/proc/%d/status" % d["Pid"]):
            if l.startswith("VmRSS:"):
                k = kind(d["Name"])
                m[k] = max(m.get(k, 0), round(int(l.split()[1]) / 1024))
    return m
with open(out, "a") as f:
    for r in range(rounds):
        d = "%s/m/r%d" % (W, r)
        os.makedirs(d)
        c0 = counters()
        rate = subprocess.run(["bin/mdtest", "-n", str(n), "-bytes", nbytes, "-phases", "create", d],
                              check=True, capture_output=True, text=True).stdout.split()[1]
        time.sleep(1.5)  # the closes' reports of the round's last files
        c1 = counters()
        dl = {k: c1[k] - c0[k] for k in c1 if c1[k] - c0[k] > 0}
        line = {"build": binary, "round": r + 1, "files_before": r * n, "n": n, "bytes": int(nbytes), "rate": float(rate),
                "cpu_us": {k[4:]: round(v / n * 1e6) for k, v in dl.items() if k.startswith("cpu:")},
                "requests": {k: round(v / n, 2) for k, v in sorted(dl.items()) if not k.startswith("cpu:")},
                "rss_mib": rss()}
        f.write(json.dumps(line) + "\n")
        cpu = line["cpu_us"]
        print("round %d (%d files before): %s files/s, CPU us per file %s (all %d), create batches per file %s, RSS MiB %s" % (
            r + 1, r * n, rate, " ".join("%s %d" % kv for kv in sorted(cpu.items())), sum(cpu.values()),
            line["requests"].get("fwd:create-batch", 0), " ".join("%s %d" % kv for kv in sorted(line["rss_mib"].items()))))
PY
bench_stamp "$OUT"
