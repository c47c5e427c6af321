#!/usr/bin/env bash
# What a remote request costs the processes on its path, and whether the
# Go runtime's threads are part of it (docs/benchmarks.md, "Where the time
# goes"): `sluice cluster up` (mem tier, the mount's block cache off so
# that every read crosses to the daemons, UP: more flags), ROUNDS times.
# Each cluster runs four fio streams of 1 MiB direct writes of new files
# (fsync at the end), overwrites them, reads them, then one 4 KiB random
# reader (psync, iodepth 1) on one of them for RUNTIME seconds. Beside
# each phase's throughput it records every sluice process's CPU seconds
# (user + system, /proc): per GB for the streams, µs per read for the
# random reader, per process.
#
#   bash bench/ab.sh default=. procs1=.:--procs=1 -- bench/remote4k.sh   # ~6 min
#   python3 bench/remote4k.py bench/results/ab-remote4k-*.jsonl          # the table
#
# Freed pages are held in the guest for the run (bench/holdpages.sh), so
# new files measure the software rather than the host's page faults.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
ROUNDS=${ROUNDS:-3} RUNTIME=${RUNTIME:-6} SIZE=${SIZE:-512m} OUT=${OUT:-bench/results/remote4k.jsonl}
HOLD_PAGES=${HOLD_PAGES-1}
# shellcheck source=bench/holdpages.sh
. bench/holdpages.sh
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
BIN=$(bench_sluice)
bench_dirs gmp
hold_pages "$SHM"
cpu() { python3 bench/daemoncpu.py --each "$WORK/s/cluster.json"; } # name=seconds per process
# record round phase unit value count cpu-before cpu-after
record() {
	python3 - "$@" <<'PY'
import json, sys
rnd, ph, unit, val, n, a, b = sys.argv[1:8]
a = dict(x.split("=") for x in a.split())
b = dict(x.split("=") for x in b.split())
print(json.dumps({"round": int(rnd), "phase": ph, unit: float(val), "count": float(n),
                  "cpu_s": {k: round(float(b[k]) - float(a[k]), 2) for k in b}}))
PY
}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
for round in $(seq "$ROUNDS"); do
	# shellcheck disable=SC2086
	"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 8G --ssd 0 --pfs none --mount-flags=--read-cache=0 ${UP:-} >/dev/null
	mkdir "$WORK/m/d"
	for ph in new overwrite read; do
		rw="write"
		[ "$ph" = read ] && rw="read"
		a=$(cpu)
		out=$(fio --name=s --directory="$WORK/m/d" --rw=$rw --bs=1M --size="$SIZE" --numjobs=4 --direct=1 \
			--iomem_align=4096 --end_fsync=1 --group_reporting --output-format=json |
			python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]['$rw']; print(j['bw_bytes']/1e6, j['io_bytes']/1e9)")
		b=$(cpu)
		# shellcheck disable=SC2086
		record "$round" "$ph" MBps $out "$a" "$b" >>"$OUT"
	done
	a=$(cpu)
	out=$(fio --name=rr --filename="$WORK/m/d/s.0.0" --rw=randread --bs=4k --size="$SIZE" --direct=1 --iomem_align=4096 \
		--time_based --runtime="$RUNTIME" --output-format=json |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print(j["iops"], j["total_ios"])')
	b=$(cpu)
	# shellcheck disable=SC2086
	record "$round" randread IOPS $out "$a" "$b" >>"$OUT"
	"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null
	rm -rf "$WORK/s"
done
bench_stamp "$OUT"
