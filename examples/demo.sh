#!/usr/bin/env bash
# The main job: start a local sluice cluster (metadata service with the
# embedded engine, mem + ssd + pfs data servers, two forwarding nodes, a
# FUSE mount), run a sample HPC workload of several jobs with their own job
# ids and ranks (each reads its inputs, then writes a checkpoint per rank
# with fsync, twice), print what each job did, show where the data landed,
# and stop the cluster.
#
#   STATE=/tmp/sluice-demo MNT=/tmp/sluice-demo-mnt bash examples/demo.sh
set -euo pipefail
# a kill of this script, kill -9 too, takes its cluster down (sluice cluster up --exit-with)
export SLUICE_EXIT_WITH=$$
cd "$(dirname "$0")/.."
STATE=${STATE:-/tmp/sluice-demo}
MNT=${MNT:-/tmp/sluice-demo-mnt}
SLUICE=${SLUICE:-bin/sluice}
[ -x "$SLUICE" ] || go build -o bin/sluice ./cmd/sluice

"$SLUICE" cluster down --dir "$STATE" >/dev/null 2>&1 || true
"$SLUICE" cluster up --dir "$STATE" --mount "$MNT" --mem 1G --ssd 4G
trap '"$SLUICE" cluster down --dir "$STATE" --purge' EXIT

# Shared inputs, as a pre-staged data set.
mkdir -p "$MNT/inputs"
head -c $((32 << 20)) /dev/urandom > "$STATE/seed.bin"
for i in 0 1 2; do
	dd if="$STATE/seed.bin" of="$MNT/inputs/mesh.$i" bs=1M oflag=direct status=none
done

# job JOBID RANKS CKPT_MIB: every rank reads one input, then writes two
# checkpoint versions of CKPT_MIB MiB (fsynced), as SLURM would run it.
job() {
	local id=$1 ranks=$2 mib=$3 start end read=0 written=0
	start=$(date +%s.%N)
	mkdir -p "$MNT/ckpt/job$id"
	for ((r = 0; r < ranks; r++)); do
		(
			export SLURM_JOB_ID=$id SLURM_PROCID=$r
			dd if="$MNT/inputs/mesh.$((r % 3))" of=/dev/null bs=1M iflag=direct status=none
			for v in 1 2; do
				dd if="$STATE/seed.bin" of="$MNT/ckpt/job$id/v$v.rank$r" bs=1M count="$mib" \
					oflag=direct conv=fsync status=none
			done
		) &
	done
	wait
	end=$(date +%s.%N)
	read=$((ranks * 32))
	written=$((ranks * mib * 2))
	awk -v id="$id" -v r="$ranks" -v rd="$read" -v wr="$written" -v s="$start" -v e="$end" 'BEGIN {
		t = e - s; printf "job %-6s ranks %-3d read %5d MiB  wrote %5d MiB  in %6.2f s  (%7.1f MiB/s)\n", id, r, rd, wr, t, (rd + wr) / t }'
}

echo
echo "== running 3 jobs at once"
job 1001 4 16 > "$STATE/job1001.out" &
job 1002 2 32 > "$STATE/job1002.out" &
job 1003 8 8 > "$STATE/job1003.out" &
wait
cat "$STATE"/job100?.out

echo
echo "== files per job"
for id in 1001 1002 1003; do
	printf "job %s: %s files, %s\n" "$id" "$(ls "$MNT/ckpt/job$id" | wc -l)" "$(du -sh --apparent-size "$MNT/ckpt/job$id" | cut -f1)"
done

echo
echo "== what the forwarding nodes saw, per job (job id and rank come from each process's environment)"
"$SLUICE" job activity --dir "$STATE"

echo
echo "== cluster"
"$SLUICE" cluster status --dir "$STATE"
echo
echo "== layout of one checkpoint"
"$SLUICE" file stat --dir "$STATE" "$MNT/ckpt/job1002/v2.rank1"
