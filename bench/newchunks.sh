#!/usr/bin/env bash
# The data server's CPU for new chunks against overwritten ones, with
# nothing else between (docs/benchmarks.md, "New files: the data server's
# two modes"): one `sluice cluster up` (mem tier), then ROUNDS times: STREAMS new
# files of SIZE written by fio (1 MiB direct writes, fsync at the end),
# the same files overwritten, then removed. With SHM_BEFORE=1 each round
# first writes and removes STREAMS files of SIZE on /dev/shm (4 KiB
# pages), as the passthrough does between sluice's rounds in
# bench/streams.sh. Prints and appends to OUT one JSON line per phase:
# the data server's CPU seconds (user + system, and system) per GB.
# IDLE is how long each round waits after its removal (default 1 s, for
# the removals to reach the data server): a checkpoint interval, over
# which a hypervisor may take back the pages freed (docs/benchmarks.md,
# "New files: pages the host took back"). UP adds `sluice cluster up` flags.
#
#   HOLD_PAGES=1 bash bench/newchunks.sh
#   HOLD_PAGES=1 SHM_BEFORE=1 bash bench/newchunks.sh
#   IDLE=10 UP=--mem-keep-freed=-1s bash bench/newchunks.sh   # deleted chunks' pages not kept
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3} STREAMS=${STREAMS:-4} SIZE=${SIZE:-1g}
SHM_BEFORE=${SHM_BEFORE:-}
IDLE=${IDLE:-1} UP=${UP:-}
OUT=${OUT:-bench/results/newchunks.jsonl}
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
BIN=$(bench_sluice)
bench_dirs newchunks
mkdir -p "$(dirname "$OUT")"
hold_pages "$SHM"
# shellcheck disable=SC2086 # UP is flags
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 12G --ssd 0 --pfs none $UP >/dev/null
DATA=$(python3 -c 'import json,sys; print([d["Pid"] for d in json.load(open(sys.argv[1]))["Daemons"] if d["Name"] == "data-mem"][0])' "$WORK/s/cluster.json")
cpu() { python3 -c 'import sys; sys.path.insert(0, "bench"); from proc import cpu_seconds; print(*cpu_seconds(int(sys.argv[1])))' "$DATA"; }
write() { # dir
	fio --name=s --directory="$1" --rw=write --bs=1M --size="$SIZE" --numjobs="$STREAMS" --direct=1 --iomem_align=4096 \
		--ioengine=psync --group_reporting --end_fsync=1 --output-format=json |
		python3 -c 'import json,sys; w = json.load(sys.stdin)["jobs"][0]["write"]; print(w["io_bytes"], w["bw_bytes"])'
}
phase() { # round phase
	local a b w
	a=$(cpu)
	w=$(write "$WORK/m/d")
	b=$(cpu)
	python3 - "$1" "$2" "$a" "$b" "$w" "$PAGES" "${SHM_BEFORE:+shm-before}" "$IDLE" "$UP" <<'PY' | tee -a "$OUT"
import json, sys
rnd, ph, a, b, w, pages, before, idle, up = sys.argv[1:]
(ua, sa), (ub, sb), (n, bw) = [map(float, x.split()) for x in (a, b, w)]
gb = n / 1e9
print(json.dumps({"round": int(rnd), "phase": ph, "mbps": round(bw / 1e6), "data_cpu_s_per_gb": round((ub - ua) / gb, 3),
                  "data_sys_s_per_gb": round((sb - sa) / gb, 3), "pages": pages, "before": before,
                  "idle_s": float(idle), "up": up}))
PY
}
mkdir -p "$WORK/m/d"
for r in $(seq "$ROUNDS"); do
	if [ -n "$SHM_BEFORE" ]; then
		mkdir -p "$SHM/pt"
		fio --name=p --directory="$SHM/pt" --rw=write --bs=1M --size="$SIZE" --numjobs="$STREAMS" --output-format=json >/dev/null
		rm -rf "$SHM/pt"
	fi
	phase "$r" new
	phase "$r" overwrite
	rm -rf "${WORK:?}/m/d/"*
	sleep "$IDLE" # removals reach the data server (and, the longer, the host takes the pages back)
done
bench_stamp "$OUT"
