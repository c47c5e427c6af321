#!/usr/bin/env bash
# A/B of local-cluster variants, interleaved so the host's noise falls on
# all of them alike (docs/benchmarks.md): for each round and each variant,
# `sluice cluster up` with the variant's flags and environment, then fio 4 KiB
# random read (8 s) and 1 MiB sequential write and read of 1 GiB. Besides
# the rates it prints the CPU time all the cluster's daemons spent per GB
# written and read, which this VM's noise disturbs far less than rates.
# With MD=N set, each run first does bench/mdtest -n N (create, stat, unlink
# in one directory) and prints its rates and the daemons' CPU per metadata
# operation.
#
#   bash bench/ab.sh ROUNDS VARIANT...
#   VARIANT = LABEL=ENV;UPFLAGS, e.g.
#   bash bench/ab.sh 2 'copy=;' 'zerocopy=;--zero-copy=true' 'fwdsplice=;--data-flags=--zero-copy=false'
#   bash bench/ab.sh 2 'default=;' 'procs1=GOMAXPROCS=1;'
#   MD=10000 bash bench/ab.sh 3 'wbunlink=;' 'syncunlink=;--mount-flags=--writeback-unlinks=false'
# SLUICE_BIN in a variant's environment runs another build of sluice, e.g.
# the previous commit's:  bash bench/ab.sh 3 'new=;' 'old=SLUICE_BIN=/tmp/sluice-old;'
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:?usage: bench/ab.sh ROUNDS LABEL=ENV\;UPFLAGS...}
shift
[ $# -gt 0 ] || { echo "usage: bench/ab.sh ROUNDS LABEL=ENV;UPFLAGS..." >&2; exit 2; }
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
go build -o bin/sluice ./cmd/sluice
go build -o bin/mdtest ./bench/mdtest
cpu() { python3 bench/daemoncpu.py "$1"; } # CPU seconds of the cluster's daemons
FIO="--direct=1 --iomem_align=4096 --ioengine=psync --output-format=json"
run() { # label env upflags
	W=$(mktemp -d /tmp/sluice-ab.XXXXXX)
	# shellcheck disable=SC2016,SC2086
	bin=$(env $2 sh -c 'echo "${SLUICE_BIN:-bin/sluice}"')
	# shellcheck disable=SC2086
	env $2 "$bin" cluster up --dir "$W/s" --mount "$W/m" --mem 4G --ssd 0 --pfs none $3 >/dev/null
	md=""
	if [ -n "${MD:-}" ]; then
		c0=$(cpu "$W/s/cluster.json")
		md=$(bin/mdtest -n "$MD" "$W/m/md" | awk '{for (i = 1; i < NF; i += 2) printf "%s_per_s=%s ", $i, $(i + 1)}')
		c1=$(cpu "$W/s/cluster.json")
		md="$md md_cpu_us_per_op=$(python3 -c "print(round(($c1-$c0)*1e6/(3*$MD), 1))")"
	fi
	# shellcheck disable=SC2086
	r=$(fio --name=r --filename="$W/m/rr" --rw=randread --bs=4k --size=256m --time_based --runtime=8 $FIO 2>/dev/null |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))')
	c0=$(cpu "$W/s/cluster.json")
	# shellcheck disable=SC2086
	w=$(fio --name=w --filename="$W/m/sq" --rw=write --bs=1M --size=1g --end_fsync=1 $FIO 2>/dev/null |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["write"]["bw_bytes"]/1e6))')
	c1=$(cpu "$W/s/cluster.json")
	# shellcheck disable=SC2086
	s=$(fio --name=s --filename="$W/m/sq" --rw=read --bs=1M --size=1g $FIO 2>/dev/null |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6))')
	c2=$(cpu "$W/s/cluster.json")
	echo "$1 $md randread_iops=$r seqwrite_mbps=$w seqread_mbps=$s" \
		"write_cpu_s_per_gb=$(python3 -c "print(round(($c1-$c0)/1.0737, 2))")" \
		"read_cpu_s_per_gb=$(python3 -c "print(round(($c2-$c1)/1.0737, 2))")"
	"$bin" cluster down --dir "$W/s" --purge >/dev/null
	rm -rf "$W"
}
for _ in $(seq "$ROUNDS"); do
	for v in "$@"; do
		label=${v%%=*}
		rest=${v#*=}
		run "$label" "${rest%%;*}" "${rest#*;}"
	done
done
