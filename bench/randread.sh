#!/usr/bin/env bash
# 4 KiB random I/O side by side (issue 18, goal 4; docs/benchmarks.md):
# fio randread and randwrite of 4 KiB, iodepth 1 (psync) and 16 (libaio),
# 1 and 4 jobs, on a 256 MiB file per job, against the go-fuse passthrough
# over tmpfs (direct I/O, kernel passthrough off), sluice (`sluice cluster up`, mem
# tier) with the mount's block cache on (--read-cache 512M, the default
# since 2026-11-26) and with it off (--read-cache 0), in
# interleaved rounds. Prints IOPS medians (min-max) and ratios to the
# passthrough; raw results: $OUT (JSON Lines).
#
#   bash bench/randread.sh              # 3 rounds, 10 s per case, ~20 min
#   ROUNDS=1 RUNTIME=3 bash bench/randread.sh
#   RWS=randread OUT=/tmp/rr.jsonl bash bench/randread.sh   # reads only
#   MONITOR_AB=1 bash bench/randread.sh  # also sluice with Beacon's monitoring off
#                                        # (sluice-nomon, block cache on): its cost per 4 KiB op
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3} RUNTIME=${RUNTIME:-10} SIZE=${SIZE:-256m} RWS=${RWS:-randread randwrite} MONITOR_AB=${MONITOR_AB:-}
OUT=${OUT:-bench/results/randread.jsonl}
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
BIN=$(bench_sluice)
. bench/passthrough.sh
WORK=$(mktemp -d /tmp/sluice-randread.XXXXXX)
SHM=$(mktemp -d /dev/shm/sluice-randread.XXXXXX)
cleanup() {
	set +e
	"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1
	"$BIN" cluster down --dir "$WORK/n" --purge >/dev/null 2>&1
	"$BIN" cluster down --dir "$WORK/o" --purge >/dev/null 2>&1
	stop_passthrough "$WORK/pt"
	rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT
start_passthrough "$WORK/pt" "$SHM/pt"
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/sluice" --mem 4G --ssd 0 --pfs none --mount-flags "--read-cache 512M" >/dev/null
"$BIN" cluster up --dir "$WORK/n" --mount "$WORK/nocache" --mem 4G --ssd 0 --pfs none --mount-flags "--read-cache 0" >/dev/null
declare -A DIR=([passthrough]=$WORK/pt [sluice]=$WORK/sluice [sluice-nocache]=$WORK/nocache)
TARGETS="passthrough sluice sluice-nocache"
if [ -n "$MONITOR_AB" ]; then
	"$BIN" cluster up --dir "$WORK/o" --mount "$WORK/nomon" --mem 4G --ssd 0 --pfs none --monitor=false \
		--mount-flags "--read-cache 512M" >/dev/null
	DIR[sluice-nomon]=$WORK/nomon
	TARGETS="$TARGETS sluice-nomon"
fi
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
# lay the files out once per target and job count (written, closed: the
# measured jobs open them again)
for t in $TARGETS; do
	for j in 1 4; do
		mkdir -p "${DIR[$t]}/j$j"
		fio --name=r --directory="${DIR[$t]}/j$j" --rw=write --bs=1m --size="$SIZE" --numjobs=$j --direct=1 \
			--ioengine=psync --output-format=json >/dev/null
	done
done
for round in $(seq "$ROUNDS"); do
	order=$TARGETS
	[ $((round % 2)) = 0 ] && order=$(echo "$TARGETS" | tr ' ' '\n' | tac | tr '\n' ' ')
	for rw in $RWS; do
		for j in 1 4; do
			for qd in 1 16; do
				engine=psync
				[ "$qd" -gt 1 ] && engine=libaio
				for t in $order; do
					fio --name=r --directory="${DIR[$t]}/j$j" --rw=$rw --bs=4k --size="$SIZE" --numjobs=$j \
						--iodepth=$qd --ioengine=$engine --direct=1 --iomem_align=4096 --time_based --runtime="$RUNTIME" \
						--group_reporting --output-format=json 2>/dev/null |
						python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; t,rw,n,qd,r=sys.argv[1:]; print(json.dumps({"target":t,"rw":rw,"jobs":int(n),"iodepth":int(qd),"round":int(r),"iops":round(j["read"]["iops"]+j["write"]["iops"])}))' \
							"$t" "$rw" "$j" "$qd" "$round" >> "$OUT"
					tail -n1 "$OUT"
				done
			done
		done
	done
done
bench_stamp "$OUT"
python3 - "$OUT" <<'PY'
import json, statistics, sys
from collections import defaultdict
g = defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    g[(r["rw"], r["jobs"], r["iodepth"], r["target"])].append(r["iops"])
def cell(v):
    m = statistics.median(v)
    return "%s (%s–%s)" % (f"{m:,.0f}", f"{min(v):,}", f"{max(v):,}") if len(v) > 1 else f"{m:,.0f}"
ab = any(k[3] == "sluice-nomon" for k in g)
print("| workload | jobs | iodepth | passthrough IOPS | sluice | sluice, block cache off | sluice/passthrough | off/passthrough |"
      + (" monitoring off | on/off |" if ab else ""))
print("|---|---|---|---|---|---|---|---|" + ("---|---|" if ab else ""))
for rw in ("randread", "randwrite"):
    for j in (1, 4):
        for qd in (1, 16):
            p, s, n, o = (g[(rw, j, qd, t)] for t in ("passthrough", "sluice", "sluice-nocache", "sluice-nomon"))
            if not p:
                continue
            mp = statistics.median(p)
            row = "| %s | %d | %d | %s | %s | %s | %.2f | %.2f |" % (rw, j, qd, cell(p), cell(s), cell(n),
                  statistics.median(s) / mp, statistics.median(n) / mp)
            if ab:
                row += " %s | %.2f |" % (cell(o), statistics.median(s) / statistics.median(o))
            print(row)
PY
