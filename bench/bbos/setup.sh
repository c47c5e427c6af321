#!/usr/bin/env bash
# What a checkpoint of `sluice bb replay` costs beside its bytes
# (docs/experiments/sim.md, "A checkpoint's setup"): the replay times
# each checkpoint from its schedule to the end of the `dd` that writes
# it, so the time includes starting dd, creating the file through the
# mount (FUSE create, the metadata service) and closing it, which the
# burst-buffer model did not have. On the BBOS experiment's buffer
# (bench/bbos/run.sh: one mem data server at 160 MB/s with a 5 ms burst,
# the pfs at 56, one forwarding daemon, the 32 MiB window, no policy),
# one cluster per round, FILES times each of, interleaved:
#   empty   dd of no bytes (start, create, fsync, close): the setup alone
#   dd      the replay's 8 MiB checkpoint (dd bs=1M oflag=direct conv=fsync)
#   inproc  the same bytes from an open file descriptor to the end of
#           its fsync, one process (bench/bbos/window.sh's timing)
# each to a new file, 200 ms apart (the device's bucket full again). One
# JSON line per file to OUT; setup.py tabulates them.
#
#   bash bench/bbos/setup.sh           # 3 rounds of 10 files each way, ~1 min
#   python3 bench/bbos/setup.py bench/bbos/setup-results.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3} FILES=${FILES:-10} SIZE_MIB=${SIZE_MIB:-8}
OUT=${OUT:-bench/bbos/setup-results.jsonl}
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
BIN=$(bench_sluice)
bench_dirs bbsetup
: > "$OUT"
for r in $(seq "$ROUNDS"); do
	"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 128M --ssd 0 --fwds 1 --data-max-mbps 160 --pfs-max-mbps 56 \
		--device-burst 5ms --mount-flags "--write-behind 32M" >/dev/null
	mkdir -p "$WORK/m/ck"
	python3 - "$WORK/m/ck" "$SIZE_MIB" "$r" "$FILES" >> "$OUT" <<'PY'
import json, mmap, os, subprocess, sys, time
d, mib, r, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
buf = mmap.mmap(-1, mib << 20)  # page-aligned, for O_DIRECT
buf.write(os.urandom(1 << 20) * mib)
mv = memoryview(buf)
def dd(path, count):
    subprocess.run(["dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=%d" % count, "oflag=direct", "conv=fsync"],
                   check=True, stderr=subprocess.DEVNULL)
def inproc(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
    t = time.monotonic()
    off = 0
    while off < len(buf):
        off += os.write(fd, mv[off:off + (1 << 20)])
    os.fsync(fd)
    secs = time.monotonic() - t
    os.close(fd)
    return secs
for i in range(files):
    for way in ("empty", "dd", "inproc"):
        path = "%s/%s.%d" % (d, way, i)
        time.sleep(0.2)
        t = time.monotonic()
        if way == "inproc":
            secs = inproc(path)
        else:
            dd(path, 0 if way == "empty" else mib)
            secs = time.monotonic() - t
        print(json.dumps({"round": r, "way": way, "file": i, "mib": 0 if way == "empty" else mib, "secs": round(secs, 5)}), flush=True)
PY
	"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null
	rm -rf "${WORK:?}/s"
done
bench_stamp "$OUT"
python3 bench/bbos/setup.py "$OUT"
