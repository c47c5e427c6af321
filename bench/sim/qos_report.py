"""QoS caps in the simulator (bench/sim/qos.sh): per case, what the capped
application's jobs and the others got; then a table over the days
(medians, min-max) and, with --check, that the cap did what a cap does.

  python3 bench/sim/qos_report.py summarise JOBS.jsonl APP DAY RATE BASE.jsonl >> OUT

Neighbours are the other applications' jobs that, in the uncapped run
(BASE), ran beside a job of APP on a forwarding node they shared: the
jobs a cap on APP is meant to protect.
  python3 bench/sim/qos_report.py table OUT [--check]
"""
import json
import statistics
import sys


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0.0


def load(path):
    return [j for j in map(json.loads, open(path)) if not j.get("warmup")]


def neighbours(jobs, app):
    """ids of other apps' jobs that overlapped in time a job of app on a
    forwarding node both held"""
    heavy = [j for j in jobs if j["app"] == app]
    out = set()
    for j in jobs:
        if j["app"] == app:
            continue
        f = set(j.get("fwd_ids") or [])
        for h in heavy:
            if f & set(h.get("fwd_ids") or []) and j["start"] < h["end"] and h["start"] < j["end"]:
                out.add(j["id"])
                break
    return out


def summarise(path, app, day, rate, base):
    near = neighbours(load(base), app)
    capped, others = [], []
    for j in load(path):
        (capped if j["app"] == app else others).append(j)
    nb = [j for j in others if j["id"] in near]
    io = lambda js: sum(j["io_time"] for j in js)
    out = {
        "day": int(day), "rate": rate, "app": app,
        "capped_jobs": len(capped), "capped_io_s": round(io(capped), 1),
        "capped_matched": sum(1 for j in capped if j.get("qos")),
        "others_jobs": len(others), "others_io_s": round(io(others), 1),
        "others_slowdown_p50": round(pct([j["slowdown"] for j in others], 0.5), 3),
        "others_slowdown_p95": round(pct([j["slowdown"] for j in others], 0.95), 3),
        "others_slowdown_max": round(max((j["slowdown"] for j in others), default=0), 3),
        "others_matched": sum(1 for j in others if j.get("qos")),
        "neighbours": len(nb), "neighbours_io_s": round(io(nb), 1),
        "neighbours_slowdown_p50": round(pct([j["slowdown"] for j in nb], 0.5), 3),
    }
    print(json.dumps(out))


def table(path, check):
    rows = [json.loads(l) for l in open(path)]
    rates = []
    for r in rows:
        if r["rate"] not in rates:
            rates.append(r["rate"])
    base = {r["day"]: r for r in rows if r["rate"] == "none"}

    def med(xs):
        return f"{statistics.median(xs):,.2f} ({min(xs):,.2f}-{max(xs):,.2f})"

    print("| cap on the app's writes | days | its I/O time × uncapped | neighbours | neighbours' I/O time × uncapped | neighbours' slowdown p50 | others' I/O time × uncapped | others' slowdown p95 |")
    print("|---|---|---|---|---|---|---|---|")
    bad = []
    for rate in rates:
        rs = [r for r in rows if r["rate"] == rate]
        ci = [r["capped_io_s"] / base[r["day"]]["capped_io_s"] for r in rs if r["day"] in base]
        oi = [r["others_io_s"] / base[r["day"]]["others_io_s"] for r in rs if r["day"] in base]
        ni = [r["neighbours_io_s"] / base[r["day"]]["neighbours_io_s"] for r in rs if r["day"] in base and base[r["day"]]["neighbours_io_s"]]
        nn = [r["neighbours"] for r in rs]
        print(f"| {rate} | {len(rs)} | {med(ci)} | {statistics.median(nn):.0f} ({min(nn)}-{max(nn)}) | {med(ni) if ni else '-'} | "
              f"{med([r['neighbours_slowdown_p50'] for r in rs])} | {med(oi)} | {med([r['others_slowdown_p95'] for r in rs])} |")
        for r in rs:
            if r["others_matched"]:
                bad.append(f"{rate} day {r['day']}: {r['others_matched']} jobs of other apps matched the rule")
            if rate != "none" and r["capped_matched"] != r["capped_jobs"]:
                bad.append(f"{rate} day {r['day']}: {r['capped_matched']} of {r['capped_jobs']} capped jobs matched")
            b = base.get(r["day"])
            if rate != "none" and b and r["capped_jobs"] and not r["capped_io_s"] > b["capped_io_s"]:
                bad.append(f"{rate} day {r['day']}: the capped app's I/O time did not grow ({r['capped_io_s']} vs {b['capped_io_s']})")
    if check:
        if bad:
            sys.exit("qos check failed:\n  " + "\n  ".join(bad))
        print("qos check: the rule matched the app's jobs only, and its cap slowed them")


if __name__ == "__main__":
    if sys.argv[1] == "summarise":
        summarise(*sys.argv[2:7])
    else:
        table(sys.argv[2], "--check" in sys.argv[3:])
