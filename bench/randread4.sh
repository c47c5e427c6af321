#!/usr/bin/env bash
# Where four 4 KiB random readers at iodepth 1 spend their time (issue 18,
# goal 4; docs/benchmarks.md "4 KiB random I/O"): `sluice cluster up` with the
# mount's block cache at its default (512 MiB), four 256 MiB files laid
# out and closed, then fio randread, psync, numjobs 4, for RUNTIME
# seconds, ROUNDS times on the same files, each round followed by the same
# reads through the go-fuse passthrough over tmpfs (bench/passthrough);
# per round both IOPS and their ratio, each reader's IOPS, the CPU
# seconds of every sluice process (from /proc), and the share
# of reads the block cache answered (the mount's counters). With PERF=1 a
# system-wide `perf record -g` of the last round's middle 5 s
# ($OUT_DIR/perf.data). Each round also gives sluice's reads second by
# second, all readers together (fio's IOPS log): how long the cache takes
# to settle.
#
#   bash bench/randread4.sh              # 3 rounds of 10 s, JSON lines on stdout
#   PERF=1 bash bench/randread4.sh > bench/results/randread4-2026-11-27.jsonl
#   UPFLAGS=--mount-flags=--read-cache=2G bash bench/randread4.sh   # other `sluice cluster up` flags
#   SLUICE_BIN=/tmp/sluice-old bash bench/randread4.sh   # another build (e.g. the previous commit's)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3} RUNTIME=${RUNTIME:-10} PERF=${PERF:-} OUT_DIR=${OUT_DIR:-/tmp/sluice-randread4}
UPFLAGS=${UPFLAGS:-}
RANDREPEAT=${RANDREPEAT:-0} # fresh offsets every round (fio's default, 1, replays the same ones)
BASE=${BASE:-$((21000 + RANDOM % 200 * 10))}
. bench/passthrough.sh
BIN=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-rr4.XXXXXX)
SHM=$(mktemp -d /dev/shm/sluice-rr4.XXXXXX)
cleanup() {
	set +e
	"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1
	stop_passthrough "$WORK/pt"
	rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT
mkdir -p "$OUT_DIR"
start_passthrough "$WORK/pt" "$SHM"
# shellcheck disable=SC2086
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 4G --ssd 0 --pfs none --pprof-base "$BASE" $UPFLAGS >/dev/null
for d in "$WORK/m/j4" "$WORK/pt/j4"; do
	mkdir -p "$d"
	fio --name=r --directory="$d" --rw=write --bs=1m --size=256m --numjobs=4 --direct=1 --ioengine=psync \
		--output-format=json >/dev/null
done
MOUNT_PORT=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["Daemons"]; print(sys.argv[2] and int(sys.argv[2]) + [x["Name"] for x in d].index("mount"))' "$WORK/s/cluster.json" "$BASE")
snap() { # CPU seconds per process, the mount's read counters and its resident memory
	python3 - "$WORK/s/cluster.json" "$MOUNT_PORT" <<'PY'
import json, sys, urllib.request
sys.path.insert(0, "bench")
from proc import cpu_seconds, daemons, status_kib
out = {}
for name, pid in daemons(sys.argv[1]).items():
    out[name] = cpu_seconds(pid)[0]
    if name == "mount":
        out["mount_rss_mib"] = status_kib(pid, "VmRSS") >> 10
for l in urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[2]).read().decode().splitlines():
    if l.startswith("sluice_client_block_cache_hits_total "):
        out["cache_hits"] = float(l.split()[1])
print(json.dumps(out))
PY
}
for r in $(seq "$ROUNDS"); do
	a=$(snap)
	rm -f "$WORK"/iops*.log
	fio --name=r --directory="$WORK/m/j4" --rw=randread --bs=4k --size=256m --numjobs=4 --direct=1 --iomem_align=4096 \
		--ioengine=psync --time_based --runtime="$RUNTIME" --randrepeat="$RANDREPEAT" --output-format=json \
		--write_iops_log="$WORK/iops" --log_avg_msec=1000 > "$WORK/fio.json" &
	fp=$!
	if [ -n "$PERF" ] && [ "$r" = "$ROUNDS" ]; then
		sleep $((RUNTIME / 3))
		perf record -a -g -o "$OUT_DIR/perf.data" -- sleep 5 2>/dev/null
	fi
	wait $fp
	b=$(snap)
	# the go-fuse passthrough over tmpfs, the same reads right after
	fio --name=r --directory="$WORK/pt/j4" --rw=randread --bs=4k --size=256m --numjobs=4 --direct=1 --iomem_align=4096 \
		--ioengine=psync --time_based --runtime="$RUNTIME" --group_reporting --randrepeat="$RANDREPEAT" --output-format=json > "$WORK/pt.json"
	python3 - "$WORK/fio.json" "$a" "$b" "$r" "$WORK/pt.json" "$WORK" <<'PY' | bench_stamp - "$UPFLAGS"
import collections, glob, json, sys


def per_second(work):  # fio's per-reader IOPS logs (ms, IOPS, ...), summed by second
    secs = collections.Counter()
    for f in glob.glob(work + "/iops_iops.*.log"):
        for line in open(f):
            ms, v = line.split(",")[:2]
            secs[(int(ms) + 500) // 1000] += int(v)
    return [secs[s] for s in sorted(secs)]


jobs = json.load(open(sys.argv[1]))["jobs"]  # one per reader
iops = sum(x["read"]["iops"] for x in jobs)
pt = json.load(open(sys.argv[5]))["jobs"][0]["read"]["iops"]
a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
ops = sum(x["read"]["total_ios"] for x in jobs)
cpu = {k: round(b[k] - a[k], 2) for k in a if k not in ("cache_hits", "mount_rss_mib")}
print(json.dumps({"round": int(sys.argv[4]), "iops": round(iops), "passthrough_iops": round(pt),
                  "ratio": round(iops / pt, 2), "reader_iops": sorted(round(x["read"]["iops"]) for x in jobs), "reads": ops,
                  "cache_share": round((b["cache_hits"] - a["cache_hits"]) / max(ops, 1), 3),
                  "cpu_s": cpu,
                  "us_cpu_per_read": round(1e6 * (sum(cpu.values())) / max(ops, 1), 1),
                  "iops_per_s": per_second(sys.argv[6]), "mount_rss_mib": b["mount_rss_mib"]}))
PY
done
