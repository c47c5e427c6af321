#!/usr/bin/env python3
"""Tables of the BBOS experiment (bench/bbos/run.sh, docs/experiments/bbos.md).

    python3 bench/bbos/report.py bench/bbos/results.jsonl.gz
    ... | python3 bench/bbos/report.py --line     # one run's summary

Cells are medians over the runs with the range (min-max) beside them.
"""
import gzip
import json
import statistics
import sys
from collections import defaultdict

MiB = 1 << 20


def metrics(r):
    mix = r["Mix"]
    S, T, periods = mix["Buffer"], mix["Period"] / 1e9, mix["Periods"]
    apps = {a["Name"]: a for a in mix["Apps"]}
    admitted = r.get("Admitted") or []
    ck = [c for c in (r.get("Checkpoint") or [])]
    ok = [c for c in ck if not c.get("Err")]
    lat = [c["End"] - c["At"] for c in ok] or [0]
    served = defaultdict(int)
    late = 0
    for c in ok:
        p = int(c["At"] // T)
        if c["End"] <= (p + 1) * T:
            served[p] += c["Bytes"]
        else:
            late += 1
    fails = r.get("Failures") or []
    # the best any cold-data order can do: the failures of the
    # applications whose newest checkpoints fit the buffer, likeliest to
    # restart first, with room kept for the largest checkpoint and the
    # 4 MiB stall reserve (manager/bbos's deleters)
    room = max([apps[a]["Size"] for a in admitted] or [0]) + 4 * MiB
    hot, used = set(), 0
    for a in sorted(admitted, key=lambda a: (apps[a]["MTBF"], a)):
        if used + apps[a]["Size"] <= S - room:
            hot.add(a)
            used += apps[a]["Size"]
    rs = r.get("Restarts") or []
    tot = r["Final"]["Totals"]
    pools = r["Final"].get("Pools") or [{}]
    return {
        "admitted": sum(apps[a]["Size"] * T / (apps[a]["Period"] / 1e9) for a in admitted) / S,
        "util": sum(served[p] for p in range(periods)) / periods / S,
        "lat_mean": statistics.mean(lat),
        "lat_p95": sorted(lat)[int(0.95 * (len(lat) - 1))],
        "lat_max": max(lat),
        "late": late / max(len(ck), 1),
        "errors": len(ck) - len(ok),
        "hit": sum(f["Hit"] for f in fails) / len(fails) if fails else float("nan"),
        "failures": len(fails),
        "ideal": sum(f["App"] in hot for f in fails) / len(fails) if fails else float("nan"),
        "restart_mbps": sum(x["Bytes"] for x in rs) / sum(x["Seconds"] for x in rs) / 1e6 if rs else float("nan"),
        "restart_hit": sum(x["Hit"] for x in rs) / len(rs) if rs else float("nan"),
        "demoted": tot["Demoted"] / MiB,
        "bypassed": tot["Bypassed"] / MiB,
        "evicted": tot["Evicted"] / MiB,
        "waited": pools[0].get("WaitedTotal", 0) / 1e9,
    }


def cell(xs, fmt="%.2f"):
    xs = [x for x in xs if x == x]
    if not xs:
        return "-"
    m = statistics.median(xs)
    if len(xs) == 1 or min(xs) == max(xs):
        return fmt % m
    return (fmt + " (" + fmt + "–" + fmt + ")") % (m, min(xs), max(xs))


def table(head, rows):
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()


def line(r):
    m = metrics(r)
    print("%-8s %-16s DWPP %.2f %-4s run %d: admitted %.2f S, served %.2f S, checkpoint %.2f s mean %.2f s max, %d%% late, "
          "failure hits %.0f%%, restarts %.0f MB/s, demoted %.0f MiB, bypassed %.0f MiB" % (
              r["exp"], r["label"], r["Mix"]["DWPP"], r["Mix"]["Congestion"], r["run"], m["admitted"], m["util"],
              m["lat_mean"], m["lat_max"], 100 * m["late"], 100 * m["hit"], m["restart_mbps"], m["demoted"], m["bypassed"]))


def main(path):
    op = gzip.open if path.endswith(".gz") else open
    runs = [json.loads(l) for l in op(path, "rt") if l.strip()]
    groups = defaultdict(list)
    for r in runs:
        # the mix's classes: applications per checkpoint period (T, T/2, ...)
        per = defaultdict(int)
        for a in r["Mix"]["Apps"]:
            per[round(r["Mix"]["Period"] / a["Period"])] += 1
        classes = " ".join("%d×%s" % (per[k], "T" if k == 1 else "T/%d" % k) for k in sorted(per))
        key = (r["exp"], r["label"], r["Mix"]["DWPP"], r["Mix"]["Congestion"], r["mtbf_minutes"], classes)
        groups[key].append(metrics(r))
    def col(ms, k, fmt="%.2f", scale=1):
        return cell([m[k] * scale for m in ms], fmt)
    exps = sorted({k[0] for k in groups})
    if "perf" in exps:
        print("### Checkpoints and utilisation (perf)\n")
        rows = []
        for k in sorted(k for k in groups if k[0] == "perf"):
            ms = groups[k]
            rows.append([k[1], "%.1f" % k[2], k[3], col(ms, "admitted"), col(ms, "util"), col(ms, "lat_mean"),
                         col(ms, "lat_max"), col(ms, "late", "%.0f", 100), col(ms, "hit", "%.0f", 100),
                         col(ms, "restart_mbps", "%.0f"), col(ms, "demoted", "%.0f"), str(len(ms))])
        table(["policy", "DWPP (S)", "congestion", "admitted (S/period)", "served in period (S)", "checkpoint s (mean)",
               "checkpoint s (max)", "late %", "failure hits %", "restart MB/s", "demoted MiB", "runs"], rows)
    # utilisation: the most a policy served per period with every
    # checkpoint of every run in time (perf and restart runs: the same
    # single-period mixes)
    best, at = defaultdict(float), {}
    for k, ms in groups.items():
        if k[0] in ("perf", "restart") and all(m["late"] == 0 and m["errors"] == 0 for m in ms):
            u = statistics.median(m["util"] for m in ms)
            if u > best[(k[1], k[3])]:
                best[(k[1], k[3])], at[(k[1], k[3])] = u, k[2]
    if best:
        print("### Buffer utilisation\n")
        ded = {c: v for (p, c), v in best.items() if p == "dedicated"}
        table(["policy", "congestion", "most served per period, no checkpoint late (S)", "at DWPP (S)", "× dedicated"],
              [[p, c, "%.2f" % v, "%.1f" % at[(p, c)], "%.2f" % (v / ded[c]) if ded.get(c) else "-"]
               for (p, c), v in sorted(best.items())])
    if "bypass" in exps:
        print("### Bypass (bypass)\n")
        rows = []
        for dwpp in sorted({k[2] for k in groups if k[0] == "bypass"}):
            on = [g for k, g in groups.items() if k[0] == "bypass" and k[2] == dwpp and k[1] == "bbos"]
            off = [g for k, g in groups.items() if k[0] == "bypass" and k[2] == dwpp and k[1] == "bbos-nobypass"]
            if not on or not off:
                continue
            on, off = on[0], off[0]
            d_on = statistics.median(m["demoted"] for m in on)
            d_off = statistics.median(m["demoted"] for m in off)
            rows.append(["%.1f" % dwpp, col(off, "demoted", "%.0f"), col(on, "demoted", "%.0f"), col(on, "bypassed", "%.0f"),
                         "%.0f" % (100 * (1 - d_on / d_off)) if d_off else "-", col(off, "lat_mean"), col(on, "lat_mean"),
                         col(off, "hit", "%.0f", 100), col(on, "hit", "%.0f", 100)])
        table(["DWPP (S)", "demoted MiB, no bypass", "demoted MiB, bypass", "bypassed MiB", "demoted −%",
               "checkpoint s, no bypass", "checkpoint s, bypass", "hits % no bypass", "hits % bypass"], rows)
    if "restart" in exps:
        print("### Restart hit ratio (restart)\n")
        rows = []
        for k in sorted(k for k in groups if k[0] == "restart"):
            ms = groups[k]
            rows.append(["%.1f" % k[2], "%d min" % k[4], k[1], col(ms, "hit", "%.1f", 100), col(ms, "ideal", "%.1f", 100),
                         col(ms, "restart_hit", "%.0f", 100), col(ms, "restart_mbps", "%.0f"), col(ms, "failures", "%.0f")])
        table(["DWPP (S)", "MTBF up to", "policy", "failure hits %", "hot set's share of failures %", "restart hits %", "restart MB/s",
               "failures"], rows)
    if "versions" in exps:
        print("### Version awareness (versions)\n")
        rows = []
        for k in sorted(k for k in groups if k[0] == "versions"):
            ms = groups[k]
            rows.append([k[5], k[1], col(ms, "hit", "%.1f", 100), col(ms, "restart_mbps", "%.0f"), col(ms, "failures", "%.0f")])
        table(["applications by checkpoint period", "policy", "failure hits %", "restart MB/s", "failures"], rows)


def check(path):
    """The smoke run's figures are there and sane: every admitted
    application wrote its checkpoints without error, something was served
    and demoted, dedicated admitted S at most and the over-subscribing
    policies more, hit ratios are ratios."""
    op = gzip.open if path.endswith(".gz") else open
    runs = [json.loads(l) for l in op(path, "rt") if l.strip()]
    bad = []
    if not runs:
        bad.append("no runs")
    for r in runs:
        m, name = metrics(r), "%s %s %.1f" % (r["exp"], r["label"], r["Mix"]["DWPP"])
        if not r.get("Checkpoint") or m["errors"]:
            bad.append("%s: %d checkpoints, %d failed" % (name, len(r.get("Checkpoint") or []), m["errors"]))
        if not (m["util"] > 0 and m["demoted"] > 0 and m["admitted"] > 0):
            bad.append("%s: served %.2f S, demoted %.0f MiB, admitted %.2f S" % (name, m["util"], m["demoted"], m["admitted"]))
        if r["label"] == "dedicated" and m["admitted"] > 1.02:
            bad.append("%s: dedicated admitted %.2f S" % (name, m["admitted"]))
        if r["label"] != "dedicated" and r["Mix"]["DWPP"] > 1.5 and m["admitted"] <= 1.0:
            bad.append("%s: admitted %.2f S, no over-subscription" % (name, m["admitted"]))
        if m["hit"] == m["hit"] and not 0 <= m["hit"] <= 1:
            bad.append("%s: hit ratio %.2f" % (name, m["hit"]))
    if bad:
        print("bbos smoke: figures wrong:\n  " + "\n  ".join(bad))
        sys.exit(1)
    print("bbos smoke: %d runs, figures sane" % len(runs))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        check(sys.argv[2])
    elif sys.argv[1:] == ["--line"]:
        for l in sys.stdin:
            line(json.loads(l))
    else:
        main(sys.argv[1])
