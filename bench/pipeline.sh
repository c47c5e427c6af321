#!/usr/bin/env bash
# The staged pipeline under load (docs/benchmarks.md): a second client's
# stat and 4 KiB read latency on a forwarding node, unloaded and while
# another client streams 1 MiB writes through the same forwarding node to a
# throttled data server. Also every process's peak RSS with 16 concurrent
# 1 MiB write streams, then 16 read streams.
#
#   bash bench/pipeline.sh              # 10 s per phase
#   SMOKE=1 bash bench/pipeline.sh      # 2 s per phase
#
# Prints one JSON line per phase and a Markdown summary.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
SECS=${SECS:-10}
[ "$SMOKE" = 1 ] && SECS=2
DATA_MBPS=${DATA_MBPS:-100}
BIN=$(bench_sluice)
bench_tool probe >/dev/null
WORK=$(mktemp -d /tmp/sluice-pipeline.XXXXXX)
cleanup() {
	[ -n "${PROBE_PID:-}" ] && kill "$PROBE_PID" 2>/dev/null || true
	fusermount3 -u "$WORK/mnt2" 2>/dev/null || true
	"$BIN" cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# one forwarding node: both clients go through it; the mem data server is
# throttled so that bulk writes queue in the forwarding node
"$BIN" cluster up --dir "$WORK/state" --mount "$WORK/mnt" --fwds 1 --mem 4G --ssd 0 --pfs none \
	--data-max-mbps "$DATA_MBPS" >/dev/null
META=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["MetaAddr"])' "$WORK/state/cluster.json")
FWD_PID=$(python3 -c 'import json,sys; print([d["Pid"] for d in json.load(open(sys.argv[1]))["Daemons"] if d["Name"]=="fwd-0"][0])' "$WORK/state/cluster.json")
# the probing client: its own mount, no attribute cache, so every stat
# reaches the forwarding node
mkdir -p "$WORK/mnt2"
"$BIN" mount --meta "$META" --secret-file "$WORK/state/secret" --node probe --attr-timeout 0 --entry-timeout 0 --meta-cache 0 \
	--monitor=false "$WORK/mnt2" > "$WORK/probe-mount.log" 2>&1 &
PROBE_PID=$!
for _ in $(seq 100); do mountpoint -q "$WORK/mnt2" && break; sleep 0.1; done
dd if=/dev/urandom of="$WORK/mnt/probe.dat" bs=1M count=8 status=none
sync "$WORK/mnt/probe.dat"

bin/probe -duration "${SECS}s" "$WORK/mnt2/probe.dat" > "$WORK/unloaded.json"
fio --name=bulk --directory="$WORK/mnt" --rw=write --bs=1m --size=1g --direct=1 --iomem_align=4096 \
	--time_based --runtime=$((SECS + 2)) --numjobs=2 --output-format=json > "$WORK/bulk.json" &
FIO=$!
sleep 1
bin/probe -duration "${SECS}s" "$WORK/mnt2/probe.dat" > "$WORK/loaded.json"
wait $FIO

# peak RSS of every process with 16 concurrent 1 MiB write streams, then
# 16 read streams of the same files (the data server capped, so requests
# queue in the forwarding daemon: the worst case for its memory)
fio --name=rss --directory="$WORK/mnt" --rw=write --bs=1m --size=$((SECS * 8))m --direct=1 --iomem_align=4096 \
	--numjobs=16 --output-format=json > "$WORK/rss-fio.json"
fio --name=rss --directory="$WORK/mnt" --rw=read --bs=1m --size=$((SECS * 8))m --direct=1 --iomem_align=4096 \
	--numjobs=16 --output-format=json > "$WORK/rss-fio-read.json"
HWM=$(awk '/VmHWM/ {print $2}' "/proc/$FWD_PID/status")
python3 - "$WORK/state/cluster.json" > "$WORK/rss.json" <<'PY'
import json, sys
sys.path.insert(0, "bench")
from proc import daemons, status_kib
print(json.dumps({name: status_kib(pid, "VmHWM") for name, pid in daemons(sys.argv[1]).items()}))
PY

python3 - "$WORK" "$HWM" <<'PY' | bench_stamp -
import json, sys
w, hwm = sys.argv[1], int(sys.argv[2])
un, lo = json.load(open(f"{w}/unloaded.json")), json.load(open(f"{w}/loaded.json"))
bulk = json.load(open(f"{w}/bulk.json"))
bw = sum(j["write"]["bw_bytes"] for j in bulk["jobs"]) / 1e6
rss = json.load(open(f"{w}/rss.json"))
print(json.dumps({"unloaded": un, "loaded": lo, "bulk_mbps": bw, "fwd_hwm_kib": hwm, "hwm_kib": rss}))
print(f"\nbulk writer: {bw:.0f} MB/s into a data server capped at the configured rate\n")
print("| probe | unloaded p50 / p99 (µs) | loaded p50 / p99 (µs) | p99 loaded / unloaded |")
print("|---|---|---|---|")
for k in ("stat", "read4k"):
    u, l = un[k], lo[k]
    print(f"| {k} | {u['P50']:.0f} / {u['P99']:.0f} | {l['P50']:.0f} / {l['P99']:.0f} | {l['P99'] / u['P99']:.2f} |")
print("\npeak RSS (VmHWM) after 16 concurrent 1 MiB write streams, then 16 read streams:\n")
print("| process | peak RSS (MiB) |")
print("|---|---|")
for name, kib in rss.items():
    print(f"| {name} | {kib / 1024:.0f} |")
if hwm > 512 * 1024:
    sys.exit(f"forwarding daemon peak RSS {hwm / 1024:.0f} MiB > 512 MiB")
PY
