#!/usr/bin/env bash
# Metadata-only A/B of this tree's build against another build (OLD): per
# round, a fresh `sluice cluster up` with each build in turn and bench/mdtest run
# three times on it (create, stat, unlink of N files). Prints one line per
# mdtest run, "LABEL create N stat N unlink N"; compare medians per round,
# since this VM's single runs swing ±30 % (docs/benchmarks.md).
#
#   OLD=/tmp/sluice-pre13 ROUNDS=4 N=5000 bash bench/md-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${OLD:?set OLD to the other build of sluice}
N=${N:-5000}
go build -o bin/sluice ./cmd/sluice
go build -o bin/mdtest ./bench/mdtest
for _ in $(seq 1 "${ROUNDS:-4}"); do
	for v in new old; do
		bin=bin/sluice
		[ "$v" = old ] && bin=$OLD
		W=$(mktemp -d /tmp/sluice-mdab.XXXXXX)
		"$bin" cluster up --dir "$W/s" --mount "$W/m" --mem 4G --ssd 0 --pfs none >/dev/null
		for k in 1 2 3; do echo "$v $(bin/mdtest -n "$N" "$W/m/md$k")"; done
		"$bin" cluster down --dir "$W/s" --purge >/dev/null 2>&1 || true
		rm -rf "$W"
	done
done
