# shellcheck shell=sh
# sluice-slurm.sh: sourced by prolog.sh and epilog.sh. Reads the KEY=VALUE
# file of burst_buffer.lua ($SLUICE_CONF or /etc/sluice/slurm.conf) and
# sets SLUICE (the binary) and the positional parameters to the cluster
# flags (--meta or --dir, --secret-file).
conf=${SLUICE_CONF:-/etc/sluice/slurm.conf}
# shellcheck source=/dev/null # the site's own file
[ -r "$conf" ] && . "$conf"
SLUICE=${SLUICE:-sluice}
set --
[ -n "$META" ] && set -- "$@" --meta "$META"
[ -n "$DIR" ] && set -- "$@" --dir "$DIR"
[ -n "$SECRET_FILE" ] && set -- "$@" --secret-file "$SECRET_FILE"
