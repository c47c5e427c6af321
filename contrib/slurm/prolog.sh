#!/bin/sh
# Slurm Prolog (slurm.conf Prolog=, runs as root on each node of a job
# before it starts): registers the job with sluice, so that DFRA places
# its forwarding nodes and Beacon attributes its I/O (every request of the
# job already carries SLURM_JOB_ID). It never fails the job: a prolog that
# fails drains the node.
#
# Configuration: the KEY=VALUE file of burst_buffer.lua ($SLUICE_CONF or
# /etc/sluice/slurm.conf): SLUICE, META or DIR, SECRET_FILE.
. "$(dirname "$0")/sluice-slurm.sh"
nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | paste -sd, -)
[ -n "$nodes" ] || nodes=$(hostname)
app=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.* JobName=\([^ ]*\).*/\1/p')
if ! "$SLUICE" job start "$@" --user "${SLURM_JOB_UID:-0}" ${app:+--app "$app"} --nodes "$nodes" "$SLURM_JOB_ID" >/dev/null 2>&1; then
	logger -t sluice-prolog "job $SLURM_JOB_ID: sluice job start failed" 2>/dev/null
fi
exit 0
