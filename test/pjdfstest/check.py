"""Check a `prove -v` run of pjdfstest against the exclusion list.

usage: check.py TESTS_DIR EXCLUDE_FILE PROVE_LOG

The exclusion file lists checks that cannot pass on FUSE, one line each:
    rename/09.t 24-25,32  # why it cannot pass
Fails (exit 1) on a failed check that is not listed, on a listed check that
passed (the list must stay true), and on a test file that did not run to
its plan. Follows TAP as prove does: a check marked "# TODO" by the suite
is an expected failure (pjdfstest marks what Linux itself does otherwise),
"# SKIP" is not run. Prints passed / TODO / skipped / excluded / total.
"""
import re
import sys


def parse_ranges(s):
    out = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def main():
    tests_dir, exclude_file, log = sys.argv[1:4]
    excluded = {}
    for line in open(exclude_file):
        line = line.split("#", 1)[0].strip()
        if line:
            name, ranges = line.split()
            excluded[name] = parse_ranges(ranges)

    results = {}  # test file -> {check: ok}
    plans = {}
    cur = None
    head = re.compile(r"^(\S+\.t) \.+")
    for line in open(log, errors="replace"):
        m = head.match(line)
        if m:
            cur = m.group(1)
            if cur.startswith(tests_dir):
                cur = cur[len(tests_dir):].lstrip("/")
            results.setdefault(cur, {})
            line = line[m.end():].lstrip()
        if cur is None:
            continue
        m = re.match(r"^1\.\.(\d+)", line)
        if m:
            plans[cur] = int(m.group(1))
            continue
        m = re.match(r"^(not ok|ok) (\d+)(.*)$", line)
        if m:
            directive = re.search(r"#\s*(TODO|SKIP)", m.group(3), re.I)
            kind = directive.group(1).upper() if directive else ""
            results[cur][int(m.group(2))] = (m.group(1) == "ok", kind)

    total = passed = excl = todo = skipped = 0
    bad = []
    for name in sorted(results):
        checks = results[name]
        if name in plans and len(checks) != plans[name]:
            bad.append(f"{name}: ran {len(checks)} of {plans[name]} checks")
        skip = excluded.get(name, set())
        for n, (ok, kind) in sorted(checks.items()):
            total += 1
            if kind == "SKIP":
                skipped += 1
            elif kind == "TODO":
                todo += 1  # the suite's own expected failures (Linux behaviour)
            elif n in skip:
                excl += 1
                if ok:
                    bad.append(f"{name} check {n} passes but is excluded: remove it from {exclude_file}")
            elif ok:
                passed += 1
            else:
                bad.append(f"{name} check {n} failed")
    for name, skip in excluded.items():
        ran = results.get(name, {})
        if missing := sorted(skip - ran.keys()):
            bad.append(f"{name} checks {missing} are excluded but did not run")
    if total == 0:
        bad.append("no pjdfstest results found")
    print(f"pjdfstest: {passed} passed, {todo} marked TODO by the suite, {skipped} skipped, "
          f"{excl} excluded, {total} checks in {len(results)} files")
    for b in bad[:200]:
        print("pjdfstest: " + b)
    if len(bad) > 200:
        print(f"pjdfstest: ... and {len(bad) - 200} more")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
