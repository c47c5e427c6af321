#!/bin/sh
# Slurm Epilog (slurm.conf Epilog=, runs as root on each node of a job
# after it ends): ends the job in sluice (its forwarding nodes go back to
# the fixed mapping; Beacon builds its profile). Never fails.
. "$(dirname "$0")/sluice-slurm.sh"
if ! "$SLUICE" job end "$@" "$SLURM_JOB_ID" >/dev/null 2>&1; then
	logger -t sluice-epilog "job $SLURM_JOB_ID: sluice job end failed" 2>/dev/null
fi
exit 0
