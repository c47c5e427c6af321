#!/usr/bin/env python3
"""Tables of bench/streams.sh's results: per phase and number of streams,
MB/s of the passthrough and sluice (medians with min-max) and their ratio,
and the CPU seconds per GB every process on the path spent.

    python3 bench/streams.py RESULTS.jsonl [--up FLAGS] [--check]
    python3 bench/streams.py RESULTS.jsonl --ab FLAGS_A FLAGS_B

--up picks the runs made with those `sluice cluster up` flags (default: every
run). --check fails unless every phase has figures above zero for both
targets and sane ratios (the smoke run in make test). --ab compares
sluice's runs with flags A against those with flags B (bench/ab.sh's side labels, or streams.sh's UP labels in one file):
MB/s and CPU seconds per GB over every process, medians (min-max), A/B."""
import json
import statistics
import sys


def med(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt(v, digits=0):
    m, lo, hi = v
    if lo == hi:
        return f"{m:,.{digits}f}"
    return f"{m:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f})"


def role(name):
    for r in ("mount", "meta", "passthrough"):
        if name == r:
            return r
    if name.startswith("fwd"):
        return "fwd"
    return "data" if name.startswith(("mem", "ssd", "hdd", "pfs", "data")) else name


def main(argv):
    path, up, check = None, None, False
    i = 0
    while i < len(argv):
        if argv[i] == "--up":
            up = argv[i + 1]
            i += 2
            continue
        if argv[i] == "--ab":
            return ab(path or argv[i + 3], argv[i + 1], argv[i + 2])
        if argv[i] == "--check":
            check = True
        else:
            path = argv[i]
        i += 1
    rows = [json.loads(line) for line in open(path)]
    rows = [r for r in rows if not r.get("profiled") and (up is None or r.get("up", "") == up)]
    phases = [p for p in ("new", "overwrite", "read") if any(r["phase"] == p for r in rows)]
    streams = sorted({r["streams"] for r in rows})
    bad = []
    print("| phase | streams | passthrough MB/s | sluice MB/s | sluice/passthrough | passthrough CPU s/GB | sluice CPU s/GB | mount | fwd | data | meta | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for ph in phases:
        for n in streams:
            sel = {t: [r for r in rows if r["phase"] == ph and r["streams"] == n and r["target"] == t]
                   for t in ("passthrough", "sluice")}
            if not sel["passthrough"] or not sel["sluice"]:
                bad.append(f"{ph} {n}: missing a target")
                continue
            bw = {t: med([r["mbps"] for r in sel[t]]) for t in sel}
            # ratio per case: the i-th sluice and passthrough rows of a
            # phase ran next to each other (same round of the same run)
            ratios = [s["mbps"] / p["mbps"] for s, p in zip(sel["sluice"], sel["passthrough"]) if p["mbps"]]

            def per_gb(rs, roles=None):
                out = []
                for r in rs:
                    gb = r["bytes"] / 1e9
                    s = sum(v for k, v in r["cpu_s"].items() if roles is None or role(k) in roles)
                    out.append(s / gb if gb else 0)
                return med(out)
            cols = [fmt(per_gb(sel["sluice"], (x,)), 2) for x in ("mount", "fwd", "data", "meta")]
            print(f"| {ph} | {n} | {fmt(bw['passthrough'])} | {fmt(bw['sluice'])} | {fmt(med(ratios), 2)} | "
                  f"{fmt(per_gb(sel['passthrough']), 2)} | {fmt(per_gb(sel['sluice']), 2)} | " + " | ".join(cols) +
                  f" | {len(sel['sluice'])} |")
            for t in sel:
                if bw[t][1] <= 0:
                    bad.append(f"{ph} {n} {t}: {bw[t][1]} MB/s")
                cpu = per_gb(sel[t])
                if not 0 < cpu[0] < 50:
                    bad.append(f"{ph} {n} {t}: CPU {cpu[0]:.2f} s/GB")
            if not 0.005 < med(ratios)[0] < 100:
                bad.append(f"{ph} {n}: ratio {med(ratios)[0]:.3f}")
    if check and bad:
        print("check failed:", *bad, sep="\n  ")
        return 1
    return 0


def ab(path, a, b):
    rows = [json.loads(line) for line in open(path)]
    rows = [r for r in rows if r["target"] == "sluice" and not r.get("profiled")]
    label = {a: "A", b: "B"}
    print(f"A: `{a or '(defaults)'}`, B: `{b or '(defaults)'}`\n")
    print("| phase | streams | A MB/s | B MB/s | A/B | A CPU s/GB | B CPU s/GB | A/B | runs |")
    print("|---|---|---|---|---|---|---|---|---|")
    phases = [p for p in ("new", "overwrite", "read") if any(r["phase"] == p for r in rows)]
    for ph in phases:
        for n in sorted({r["streams"] for r in rows}):
            sel = {x: [r for r in rows if r["phase"] == ph and r["streams"] == n and r.get("side", r.get("up", "")) == x] for x in label}
            if not sel[a] or not sel[b]:
                continue
            bw = {x: med([r["mbps"] for r in sel[x]]) for x in label}
            cpu = {x: med([sum(r["cpu_s"].values()) / (r["bytes"] / 1e9) for r in sel[x]]) for x in label}
            print(f"| {ph} | {n} | {fmt(bw[a])} | {fmt(bw[b])} | {bw[a][0] / bw[b][0]:.2f} | {fmt(cpu[a], 2)} | "
                  f"{fmt(cpu[b], 2)} | {cpu[a][0] / cpu[b][0]:.2f} | {len(sel[a])}+{len(sel[b])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
