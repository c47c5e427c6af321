#!/usr/bin/env bash
# xfstests (fstests) on sluice, as root: two fresh local clusters (`sluice
# cluster up`), one for TEST_DEV and one for SCRATCH_DEV, mounted by
# xfstests itself through mount(8) (`mount -t fuse.sluice ADDR DIR -o ...`,
# /sbin/mount.fuse.sluice linked to the binary; docs/deploy.md). Builds the
# suite from ../shared/tools/xfstests.tar.gz (or $XFSTESTS_TARBALL) once,
# into $XFSTESTS_DIR, and runs ./check with the arguments given (default:
# the generic quick group). Results and each failure's diff are kept in
# $XFSTESTS_RESULTS (default /tmp/sluice-xfstests-results); the summary
# lines are printed and a failure fails the run. The Debian packages the
# build needs are listed in ../shared/tools/README.md (.ci/run installs
# them).
#
#   bash test/xfstests/run.sh                  the generic quick group (make xfstests)
#   bash test/xfstests/run.sh generic/001      one test
#   make xfstests-quick                        the tests of quick.list (in make test)
set -euo pipefail
export SLUICE_EXIT_WITH=$$ SLUICE_EXIT_REMOVE=1
cd "$(dirname "$0")/../.."
root=$(pwd)
tarball=${XFSTESTS_TARBALL:-}
if [ -z "$tarball" ]; then
	for c in "$root/../shared/tools/xfstests.tar.gz" /work/shared/tools/xfstests.tar.gz; do
		[ -f "$c" ] && tarball=$c && break
	done
fi
[ -f "${tarball:-}" ] || { echo "xfstests: tarball not found (set XFSTESTS_TARBALL)"; exit 1; }
x=${XFSTESTS_DIR:-/tmp/sluice-xfstests-$(sha256sum "$tarball" | cut -c1-12)}
if [ ! -x "$x/ltp/fsx" ]; then
	rm -rf "$x" && mkdir -p "$x"
	tar -xzf "$tarball" -C "$x" --strip-components=1
	(cd "$x" && make -j2 >"$x/build.log" 2>&1) || { echo "xfstests: build failed, $x/build.log"; exit 1; }
fi
# the harness checks a mount's type against FSTYP: a FUSE mount's is
# fuse.SUBTYPE (as for glusterfs and ceph-fuse, which it knows)
grep -q 's/fuse.sluice/fuse/' "$x/common/rc" ||
	sed -i "s|-e 's/fuse.ceph-fuse/ceph-fuse/'|-e 's/fuse.ceph-fuse/ceph-fuse/' -e 's/fuse.sluice/fuse/'|" "$x/common/rc"
for u in fsgqa fsgqa2 123456-fsgqa; do id "$u" >/dev/null 2>&1 || useradd -m "$u"; done
getent group fsgqa >/dev/null || groupadd fsgqa
# into a file of its own, then renamed: a run beside it (make test) may be
# starting bin/sluice meanwhile
go build -o bin/sluice.$$ ./cmd/sluice && mv -f bin/sluice.$$ bin/sluice
ln -sf "$root/bin/sluice" /sbin/mount.fuse.sluice
work=$(mktemp -d /tmp/sluice-xfs.XXXXXX)
chmod 755 "$work"
cleanup() {
	cd "$root"
	for m in "$work/test" "$work/scratch"; do umount "$m" 2>/dev/null || true; done
	for c in a b; do bin/sluice cluster down --dir "$work/$c" --purge >/dev/null 2>&1 || true; done
	rm -rf "$work"
}
trap cleanup EXIT
addr() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["MetaAddr"])' "$1/cluster.json"; }
for c in a b; do
	bin/sluice cluster up --dir "$work/$c" --mount "$work/$c.mnt" --mem 1G --ssd 2G ${UP:-} >/dev/null
done
mkdir -p "$work/test" "$work/scratch"
# dev,suid: the tests make device files and set-id programs (a mount is
# nodev,nosuid unless told otherwise)
cat >"$x/local.config" <<CONF
export TEST_DEV=sluice://$(addr "$work/a")
export TEST_DIR=$work/test
export SCRATCH_DEV=sluice://$(addr "$work/b")
export SCRATCH_MNT=$work/scratch
export FSTYP=fuse
export FUSE_SUBTYP=.sluice
export TEST_FS_MOUNT_OPTS="-odev,suid,secret-file=$work/a/secret,node=xfs-test,log=$work/a/logs/xfs-mount.log"
export MOUNT_OPTIONS="-odev,suid,secret-file=$work/b/secret,node=xfs-scratch,log=$work/b/logs/xfs-mount.log"
CONF
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-g quick)
results=${XFSTESTS_RESULTS:-/tmp/sluice-xfstests-results}
rm -rf "$results"
start=$(date +%s)
status=0
(cd "$x" && RESULT_BASE="$results" ./check "${args[@]}") >"$work/check.log" 2>&1 || status=1
cp "$work/check.log" "$results/check.log" 2>/dev/null || true
echo "xfstests: $(( $(date +%s) - start )) s"
grep -E '^(Ran|Not run|Failures|Passed)' "$work/check.log" || tail -20 "$work/check.log"
if [ $status -ne 0 ]; then
	mkdir -p "$results/logs" && cp -r "$work"/a/logs "$results/logs/a" && cp -r "$work"/b/logs "$results/logs/b"
	echo "xfstests: output, diffs and daemon logs kept in $results"
fi
exit $status
