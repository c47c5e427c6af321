#!/bin/sh
# Slurm Epilog (slurm.conf Epilog=, runs as root on each node of a job
# after it ends): ends the job in sluice (its forwarding nodes go back to
# the fixed mapping; Beacon builds its profile). Never fails.
conf=${SLUICE_CONF:-/etc/sluice/slurm.conf}
[ -r "$conf" ] && . "$conf"
SLUICE=${SLUICE:-sluice}
set --
[ -n "$META" ] && set -- "$@" --meta "$META"
[ -n "$DIR" ] && set -- "$@" --dir "$DIR"
[ -n "$SECRET_FILE" ] && set -- "$@" --secret-file "$SECRET_FILE"
if ! "$SLUICE" job end "$@" "$SLURM_JOB_ID" >/dev/null 2>&1; then
	logger -t sluice-epilog "job $SLURM_JOB_ID: sluice job end failed" 2>/dev/null
fi
exit 0
