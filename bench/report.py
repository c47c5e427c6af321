#!/usr/bin/env python3
"""Turns fio JSON and mdtest lines into result records, and records into the
comparison table of bench/run.sh (absolute figures and ratios)."""
import json
import statistics
import sys


def fio(target, name, path):
    with open(path) as f:
        d = json.load(f)
    job = d["jobs"][0]
    rd, wr = job["read"], job["write"]
    if "randread" in name:
        value, unit = rd["iops"], "IOPS"
    elif "read" in name:
        value, unit = rd["bw_bytes"] / 1e6, "MB/s"
    else:
        value, unit = wr["bw_bytes"] / 1e6, "MB/s"
    print(json.dumps({"target": target, "test": name, "value": value, "unit": unit}))


def md(target, name, lines):
    totals = {}
    for line in lines:
        f = line.split()
        for i in range(0, len(f) - 1, 2):
            totals[f[i]] = totals.get(f[i], 0.0) + float(f[i + 1])
    for op, v in totals.items():
        print(json.dumps({"target": target, "test": f"{name}-{op}", "value": v, "unit": "ops/s"}))


def load(paths):
    """The result records of runs (warm-ups left out), with the targets and
    workloads in the order first met."""
    recs, targets, tests = [], [], []
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r["test"].startswith("warm"):
                    continue
                if r["target"] not in targets:
                    targets.append(r["target"])
                if r["test"] not in tests:
                    tests.append(r["test"])
                recs.append(r)
    return recs, targets, tests


def table(path):
    recs, targets, tests = load([path])
    rows = {(r["target"], r["test"]): r for r in recs}
    # sluice-nomon is sluice with Beacon's monitoring off: the ratio is
    # what monitoring costs
    ratios = [b for b in ("passthrough", "gluster", "sluice-nomon") if b in targets]
    # sluice-cache (before 2026-11-26) and sluice-nocache: sluice with the
    # mount's block cache on and off, against GlusterFS
    extra = [(a, "gluster") for a in ("sluice-cache", "sluice-nocache") if {a, "gluster"} <= set(targets)]
    cols = targets + [f"sluice/{b}" for b in ratios] + [f"{a}/{b}" for a, b in extra]
    print(f"{'workload':<20}{'unit':<7}" + "".join(f"{c:>20}" for c in cols))
    for t in tests:
        unit = next(r["unit"] for (tg, ts), r in rows.items() if ts == t)
        line = f"{t:<20}{unit:<7}"
        for tg in targets:
            r = rows.get((tg, t))
            line += f"{r['value']:>20.0f}" if r else f"{'-':>20}"
        s = rows.get(("sluice", t))
        for b in ratios:
            p = rows.get((b, t))
            line += f"{s['value'] / p['value']:>20.2f}" if s and p and p["value"] else f"{'-':>20}"
        for a, b in extra:
            x, p = rows.get((a, t)), rows.get((b, t))
            line += f"{x['value'] / p['value']:>20.2f}" if x and p and p["value"] else f"{'-':>20}"
        print(line)


def check(path):
    """Fails unless every target has every workload with a rate above zero
    and sluice's ratio to each FUSE baseline is in a sane range (the smoke
    run's figures are there and mean something)."""
    recs, targets, tests = load([path])
    targets, tests = set(targets), set(tests)
    rows = {(r["target"], r["test"]): r["value"] for r in recs}
    bad = []
    if "sluice" not in targets or len(targets) < 2:
        bad.append(f"targets {sorted(targets)}: want sluice and a baseline")
    for t in sorted(targets):
        for w in sorted(tests):
            v = rows.get((t, w))
            if v is None or not v > 0:
                bad.append(f"{t} {w}: {v}")
    for t in sorted(targets & {"passthrough", "gluster", "sluice-nomon"}):
        for w in sorted(tests):
            s, b = rows.get(("sluice", w)), rows.get((t, w))
            if s and b and not 0.01 <= s / b <= 1000:
                bad.append(f"sluice/{t} {w}: {s / b:.3g} out of [0.01, 1000]")
    if bad:
        sys.exit("bench check failed:\n  " + "\n  ".join(bad))
    print(f"bench check: {len(targets)} targets x {len(tests)} workloads, all above zero, ratios in range")


def medians(paths):
    """The table over several runs' results: per target and workload the
    median (min-max), then sluice's ratios of medians to each baseline."""
    recs, targets, tests = load(paths)
    vals, units = {}, {}
    for r in recs:
        units[r["test"]] = r["unit"]
        vals.setdefault((r["target"], r["test"]), []).append(r["value"])
    med = {k: statistics.median(v) for k, v in vals.items()}
    ratios = [b for b in ("passthrough", "gluster", "sluice-nomon", "sluice-nocache") if b in targets]
    print(f"runs: {len(paths)}; cells: median (min-max)")
    print("| workload | unit | " + " | ".join(targets) + " | " + " | ".join(f"sluice/{b}" for b in ratios) + " |")
    print("|---|---|" + "---|" * (len(targets) + len(ratios)))
    for t in tests:
        cells = []
        for tg in targets:
            v = vals.get((tg, t))
            cells.append(f"{med[(tg, t)]:,.0f} ({min(v):,.0f}-{max(v):,.0f})" if v else "-")
        for b in ratios:
            s, p = med.get(("sluice", t)), med.get((b, t))
            cells.append(f"{s / p:.2f}" if s and p else "-")
        print(f"| {t} | {units[t]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "fio":
        fio(sys.argv[2], sys.argv[3], sys.argv[4])
    elif kind in ("md", "md2"):
        md(sys.argv[2], sys.argv[3], sys.stdin.read().splitlines())
    elif kind == "table":
        table(sys.argv[2])
    elif kind == "check":
        check(sys.argv[2])
    elif kind == "medians":
        medians(sys.argv[2:])
