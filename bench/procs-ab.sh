#!/usr/bin/env bash
# Does capping each daemon of a local cluster at one Go P help on a 2-core
# host? A/B of GOMAXPROCS unset and =1 for every process `sluice up`
# starts (they inherit it): fio 4 KiB random read (8 s), 1 MiB sequential
# write and read of 1 GiB, ROUNDS times each, alternating (docs/benchmarks.md).
#
#   bash bench/procs-ab.sh [ROUNDS]    # default 2
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
go build -o bin/sluice ./cmd/sluice
FIO="--direct=1 --iomem_align=4096 --ioengine=psync --output-format=json"
run() { # label
	W=$(mktemp -d /tmp/sluice-procs.XXXXXX)
	bin/sluice up --dir "$W/s" --mount "$W/m" --mem 4G --ssd 0 --pfs none >/dev/null
	# shellcheck disable=SC2086
	r=$(fio --name=r --filename="$W/m/rr" --rw=randread --bs=4k --size=256m --time_based --runtime=8 $FIO 2>/dev/null |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))')
	# shellcheck disable=SC2086
	w=$(fio --name=w --filename="$W/m/sq" --rw=write --bs=1M --size=1g --end_fsync=1 $FIO 2>/dev/null |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6))')
	# shellcheck disable=SC2086
	s=$(fio --name=s --filename="$W/m/sq" --rw=read --bs=1M --size=1g $FIO 2>/dev/null |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6))')
	echo "$1 randread_iops=$r seqwrite_mbps=$w seqread_mbps=$s"
	bin/sluice down --dir "$W/s" --purge >/dev/null
	rm -rf "$W"
}
for _ in $(seq "$ROUNDS"); do
	(unset GOMAXPROCS; run default)
	(export GOMAXPROCS=1; run gomaxprocs=1)
done
