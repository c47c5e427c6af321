#!/usr/bin/env bash
# pjdfstest on a fresh local cluster (`sluice cluster up`), as root. Builds the
# suite from ../shared/tools/pjdfstest.tar.gz (or $PJDFSTEST_TARBALL) once,
# into $PJDFSTEST_DIR, runs every test file and checks each result against
# test/pjdfstest/exclude (check.py). Fails on any failed check that is not
# excluded, on an excluded check that passes, and on a namespace update the
# pfs tier could not make (every name the mount accepts must reach the PFS).
#
#   bash test/pjdfstest/run.sh [TEST...]     e.g. tests/rename/09.t
set -euo pipefail
# a kill of this script, kill -9 too, takes its clusters down and removes
# their state (sluice cluster up --exit-with, --exit-remove)
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
cd "$(dirname "$0")/../.."
root=$(pwd)
tarball=${PJDFSTEST_TARBALL:-}
if [ -z "$tarball" ]; then
	for c in "$root/../shared/tools/pjdfstest.tar.gz" /work/shared/tools/pjdfstest.tar.gz; do
		[ -f "$c" ] && tarball=$c && break
	done
fi
[ -f "${tarball:-}" ] || { echo "pjdfstest: tarball not found (set PJDFSTEST_TARBALL)"; exit 1; }
pjd=${PJDFSTEST_DIR:-/tmp/sluice-pjdfstest-$(sha256sum "$tarball" | cut -c1-12)}
if [ ! -x "$pjd/pjdfstest" ]; then
	for t in autoreconf prove make cc; do
		command -v $t >/dev/null || { echo "pjdfstest: $t missing (apt-get install -y autoconf automake libtool perl)"; exit 1; }
	done
	rm -rf "$pjd" && mkdir -p "$pjd"
	tar -xzf "$tarball" -C "$pjd" --strip-components=1
	(cd "$pjd" && autoreconf -ifs >/dev/null 2>&1 && ./configure >/dev/null && make pjdfstest >/dev/null)
fi
# into a file of its own, then renamed: a run beside it (make test) may be
# starting bin/sluice meanwhile
go build -o bin/sluice.$$ ./cmd/sluice && mv -f bin/sluice.$$ bin/sluice
work=$(mktemp -d /tmp/sluice-pjd.XXXXXX)
state=$work/state mnt=$work/mnt
cleanup() {
	cd "$root"
	bin/sluice cluster down --dir "$state" --purge >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
# UP: more `sluice cluster up` flags (UP="--engine etcd --meta-standbys 1")
# shellcheck disable=SC2086
bin/sluice cluster up --dir "$state" --mount "$mnt" --mem 1G --ssd 2G ${UP:-} >/dev/null
mkdir "$mnt/pjd"
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(tests)
start=$(date +%s)
(cd "$mnt/pjd" && for t in "${tests[@]}"; do prove -r -v "$pjd/$t" 2>&1 || true; done) >"$work/prove.log"
echo "pjdfstest: $(( $(date +%s) - start )) s on a sluice cluster up mount"
status=0
python3 test/pjdfstest/check.py "$pjd/tests" test/pjdfstest/exclude "$work/prove.log" || status=1
if grep -h "pfs namespace update failed" "$state"/logs/meta.log; then
	echo "pjdfstest: the pfs tier could not follow the namespace (above)"
	status=1
fi
if [ $status -ne 0 ]; then
	mkdir -p /tmp/sluice-pjdfstest-logs && cp -r "$state/logs" "$work/prove.log" /tmp/sluice-pjdfstest-logs/
	echo "pjdfstest: daemon logs and prove output kept in /tmp/sluice-pjdfstest-logs"
fi
exit $status
