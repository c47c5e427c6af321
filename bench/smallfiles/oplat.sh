#!/usr/bin/env bash
# Creates' and unlinks' latency through a write-back directory: another
# build (SLUICE_BIN), this one and the go-fuse passthrough over tmpfs (the
# baseline) in turn, a fresh `sluice cluster up` (mem tier) each round
# (docs/benchmarks.md, "A full batch in the background").
#
#   SLUICE_BIN=/tmp/sluice-old ROUNDS=3 N=10000 bash bench/smallfiles/oplat.sh
set -euo pipefail
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
cd "$(dirname "$0")/../.."
OLD=${SLUICE_BIN:?SLUICE_BIN=another build}
ROUNDS=${ROUNDS:-3}
N=${N:-10000}
go build -o bin/sluice ./cmd/sluice
# shellcheck source=bench/passthrough.sh
. bench/passthrough.sh
PTW=$(mktemp -d /tmp/sluice-oplat-pt.XXXXXX)
SHM=$(mktemp -d /dev/shm/sluice-oplat.XXXXXX)
trap 'stop_passthrough "$PTW/m"; rm -rf "$PTW" "$SHM"' EXIT
start_passthrough "$PTW/m" "$SHM/pt"
for ((r = 1; r <= ROUNDS; r++)); do
	if ((r % 2)); then order=("$OLD" bin/sluice passthrough); else order=(passthrough bin/sluice "$OLD"); fi
	for b in "${order[@]}"; do
		if [ "$b" = passthrough ]; then
			python3 bench/smallfiles/oplat.py "$PTW/m/d$r" "$N" | sed "s|^|round $r passthrough |"
			rm -rf "$PTW/m/d$r"
			continue
		fi
		w=$(mktemp -d /tmp/sluice-oplat.XXXXXX)
		"$b" cluster up --dir "$w/s" --mount "$w/m" --mem 4G --ssd 0 --pfs none >/dev/null
		python3 bench/smallfiles/oplat.py "$w/m/d" "$N" | sed "s|^|round $r $b |"
		"$b" cluster down --dir "$w/s" --purge >/dev/null
		rm -rf "$w"
	done
done
