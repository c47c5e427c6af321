#!/usr/bin/env bash
# What the kernel spends writing into a tmpfs as /dev/shm is mounted
# against one with large folios (huge=within_size, as `sluice cluster up` gives its
# mem tier when run as root: cluster/memfs.go; docs/benchmarks.md, "The mem
# tier on large pages"). Two tmpfs side by side, ROUNDS rounds alternating
# which goes first; in each, system CPU seconds of: a new 2 GiB file (1 MiB
# writes), 512 new files of 4 MiB (a chunk's size) in 1 MiB and in 128 KiB
# writes, an overwrite of the 2 GiB file, a read of it.
#
#   bash bench/memfs.sh                         # 3 rounds, ~1 min; root
#   HOLD_PAGES=1 bash bench/memfs.sh            # freed memory stays the guest's (bench/holdpages.sh)
#
# Results: one JSON line per case and round in $OUT, then medians.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench/results/memfs.jsonl}
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
D=$(mktemp -d /dev/shm/sluice-memfs.XXXXXX)
cleanup() {
	set +e
	release_pages
	unmount_tmpfs "$D/huge"
	unmount_tmpfs "$D/plain"
	rm -rf "$D"
}
trap cleanup EXIT
hold_pages "$D"
mkdir -p "$D/plain" "$(dirname "$OUT")"
mount -t tmpfs -o mode=0700 tmpfs "$D/plain"
huge_tmpfs "$D/huge"
: > "$OUT.tmp"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order=(plain huge); else order=(huge plain); fi
	for fs in "${order[@]}"; do
		python3 - "$D/$fs" "$fs" "$r" >> "$OUT.tmp" <<'PY'
import json, os, sys
d, fs, rnd = sys.argv[1:]
def sys_time(f):
    t = os.times()
    f()
    return round(os.times().system - t.system, 3)
def write(path, size, ws, flags):
    buf = b"\1" * ws
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o600)
    for off in range(0, size, ws):
        os.pwrite(fd, buf, off)
    os.close(fd)
def chunks(ws):
    for i in range(512):
        write(f"{d}/c{i}", 4 << 20, ws, os.O_TRUNC)
def clear():
    for n in os.listdir(d):
        os.unlink(f"{d}/{n}")
def read():
    fd = os.open(f"{d}/big", os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
cases = [("new 2 GiB", lambda: write(f"{d}/big", 2 << 30, 1 << 20, os.O_TRUNC)),
         ("overwrite 2 GiB", lambda: write(f"{d}/big", 2 << 30, 1 << 20, 0)),
         ("read 2 GiB", read)]
for name, f in cases:
    print(json.dumps({"fs": fs, "round": int(rnd), "case": name, "sys_s": sys_time(f)}))
clear()
for ws, name in ((1 << 20, "512 x 4 MiB, 1 MiB writes"), (128 << 10, "512 x 4 MiB, 128 KiB writes")):
    print(json.dumps({"fs": fs, "round": int(rnd), "case": name, "sys_s": sys_time(lambda: chunks(ws))}))
    clear()
PY
	done
done
mv "$OUT.tmp" "$OUT"
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cases = list(dict.fromkeys(r["case"] for r in rows))
f = lambda xs: "%.2f (%.2f-%.2f)" % (statistics.median(xs), min(xs), max(xs))
print("| case | /dev/shm-like tmpfs, system s | huge=within_size, system s | ratio |")
print("|---|---|---|---|")
for c in cases:
    p = [r["sys_s"] for r in rows if r["case"] == c and r["fs"] == "plain"]
    h = [r["sys_s"] for r in rows if r["case"] == c and r["fs"] == "huge"]
    print("| %s | %s | %s | %.2f |" % (c, f(p), f(h), statistics.median(h) / max(statistics.median(p), 1e-9)))
PY
