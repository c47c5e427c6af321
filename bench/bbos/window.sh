#!/usr/bin/env bash
# One writer's checkpoint through one mount against the mount's
# write-behind window (docs/experiments/sim.md, "What still parts"): does
# a small window, one or two 1 MiB requests in flight, cost a checkpoint
# more than the device's rate, by each request's round trip through FUSE,
# the forwarding daemon and the data server? The BBOS experiment's buffer
# (bench/bbos/run.sh: one mem data server at 160 MB/s, the pfs at 56,
# one forwarding daemon), no burst-buffer policy: for each round and
# window (interleaved) a fresh `sluice cluster up` with the mount's
# --write-behind WINDOW, then FILES checkpoints of SIZE written one after
# another (dd, direct, fsync), each timed. One JSON line per checkpoint
# to OUT; the device alone takes SIZE / 160 MB/s.
#
#   bash bench/bbos/window.sh            # 3 rounds of 1M, 2M, 4M, 32M, 6 files of 8 MiB: ~3 min
#   python3 bench/bbos/window.py bench/bbos/window-results.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3} WINDOWS=${WINDOWS:-1M 2M 4M 32M} FILES=${FILES:-6} SIZE_MIB=${SIZE_MIB:-8}
OUT=${OUT:-bench/bbos/window-results.jsonl}
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
BIN=$(bench_sluice)
bench_dirs bbwindow
: > "$OUT"
for r in $(seq "$ROUNDS"); do
	for w in $WINDOWS; do
		"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 128M --ssd 0 --fwds 1 --data-max-mbps 160 --pfs-max-mbps 56 \
			--device-burst 5ms --mount-flags "--write-behind $w" >/dev/null
		for i in $(seq "$FILES"); do
			python3 - "$WORK/m/ck$i" "$SIZE_MIB" "$w" "$r" "$i" >> "$OUT" <<'PY'
import json, mmap, os, sys, time
path, mib, w, r, i = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
buf = mmap.mmap(-1, mib << 20)  # page-aligned, for O_DIRECT
buf.write(os.urandom(1 << 20) * mib)
mv = memoryview(buf)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
t = time.monotonic()
off = 0
while off < len(buf):  # 1 MiB writes, as the checkpointing applications make
    off += os.write(fd, mv[off:off + (1 << 20)])
os.fsync(fd)
secs = time.monotonic() - t
os.close(fd)
print(json.dumps({"round": r, "window": w, "file": i, "mib": mib, "secs": round(secs, 4), "mbps": round((mib << 20) / secs / 1e6, 1)}))
PY
		done
		rm -f "$WORK/m"/ck*
		"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null
		rm -rf "${WORK:?}/s"
	done
done
bench_stamp "$OUT"
python3 bench/bbos/window.py "$OUT"
