#!/usr/bin/env python3
"""Tables of bench/sim/run.sh's raw outputs (markdown, for docs/)."""
import glob, json, os, re, statistics, sys

out = sys.argv[1] if len(sys.argv) > 1 else "bench/sim/results"
check = "--check" in sys.argv

def load(path):
    with open(path) as f:
        return json.load(f)

def jobs(path):
    with open(path) as f:
        return [json.loads(l) for l in f]

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def spread(xs):
    return "%.2f–%.2f" % (min(xs), max(xs)) if xs else "-"

print("## Experiment 1: DFRA against FFM on taihulight (one simulated day each, three days, each after a week of warm-up)\n")
print("| day | jobs | I/O-intensive | median speed-up | p90 | max | saved per I/O-intensive job (min) | scaled up | saved per scaled job (min) | slower >10 % | mean fwds FFM | mean fwds DFRA |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
rows = []
for d in sorted(glob.glob(os.path.join(out, "exp1", "day-*"))):
    s = load(os.path.join(d, "summary.json"))
    c = s["compare"]
    rows.append(c)
    print("| %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %d | %.2f | %d | %.1f | %.1f |" % (
        os.path.basename(d)[4:], s["jobs"], c["intensive"], c["median_speedup"], c["p90_speedup"], c["max_speedup"],
        c["intensive_saved_s"] / 60, c["scaled"], c["scaled_saved_s"] / 60, c["slower"], s["ffm"]["mean_fwds"], s["dfra"]["mean_fwds"]))
if rows:
    print("| **median (spread)** | | | %.2f (%s) | %.2f (%s) | %.2f (%s) | %.2f (%s) | | %.2f (%s) | | | |" % (
        med([c["median_speedup"] for c in rows]), spread([c["median_speedup"] for c in rows]),
        med([c["p90_speedup"] for c in rows]), spread([c["p90_speedup"] for c in rows]),
        med([c["max_speedup"] for c in rows]), spread([c["max_speedup"] for c in rows]),
        med([c["intensive_saved_s"] / 60 for c in rows]), spread([c["intensive_saved_s"] / 60 for c in rows]),
        med([c["scaled_saved_s"] / 60 for c in rows]), spread([c["scaled_saved_s"] / 60 for c in rows])))

# per-job speed-up distribution over the three days, with what DFRA decided
sp, why = [], {}
for d in sorted(glob.glob(os.path.join(out, "exp1", "day-*"))):
    f = {j["id"]: j for j in jobs(os.path.join(d, "jobs-ffm.jsonl"))}
    for j in jobs(os.path.join(d, "jobs-dfra.jsonl")):
        g = f.get(j["id"])
        if not g or j.get("warmup") or j["io_time"] <= 0:
            continue
        x = g["io_time"] / j["io_time"]
        sp.append(x)
        if x > 1.1:
            k = re.sub(r"\([^)]*\)|\d+(\.\d+)?(?= (MB|GiB|×|forwarding|free|I/O))", "…", j["reason"])[:80]
            why[k] = why.get(k, 0) + 1
if sp:
    print("\nPer-job I/O speed-up (FFM I/O time / DFRA I/O time), all three days, %d jobs:\n" % len(sp))
    print("| < 0.9 | 0.9–1.1 | 1.1–2 | 2–5 | 5–20 | ≥ 20 |")
    print("|---|---|---|---|---|---|")
    b = [sum(1 for x in sp if x < 0.9), sum(1 for x in sp if 0.9 <= x < 1.1), sum(1 for x in sp if 1.1 <= x < 2),
         sum(1 for x in sp if 2 <= x < 5), sum(1 for x in sp if 5 <= x < 20), sum(1 for x in sp if x >= 20)]
    print("| " + " | ".join(str(x) for x in b) + " |")
    print("\nWhat DFRA decided for the jobs it sped up by > 10 % (its last reason, figures elided):\n")
    for k, n in sorted(why.items(), key=lambda kv: -kv[1])[:8]:
        print("- %d × %s" % (n, k))

for exp, what in (("exp1b", "interference pairs from our own DFRA pairwise experiment"),
                  ("exp1c", "interference factors calibrated from our own DFRA pairwise experiment (asymmetric)")):
    print("\n## Experiment %s: the same, %s\n" % (exp[3:], what))
    print("| day | median speed-up | p90 | max | saved per I/O-intensive job (min) | slower >10 % | I/O-intensive mean I/O FFM (s) | DFRA (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for d in sorted(glob.glob(os.path.join(out, exp, "day-*"))):
        s = load(os.path.join(d, "summary.json"))
        c = s["compare"]
        print("| %s | %.2f | %.2f | %.2f | %.2f | %d | %.0f | %.0f |" % (os.path.basename(d)[4:], c["median_speedup"], c["p90_speedup"], c["max_speedup"],
              c["intensive_saved_s"] / 60, c["slower"], s["ffm"]["intensive_mean_io_s"], s["dfra"]["intensive_mean_io_s"]))

print("\n## Experiment 2a: the ShenTu case (one 10,240-node N-N job reading 136.9 TB, 140 targets spread 5x)\n")
print("| placement | I/O time (s) | bandwidth (GB/s) |")
print("|---|---|---|")
for p in ("rr", "wrandom", "perf"):
    f = os.path.join(out, "exp2", "shentu-" + p, "summary.json")
    if os.path.exists(f):
        st = load(f)["ffm"]
        print("| %s | %.0f | %.1f |" % (p, st["mean_io_s"], st["mean_bw"] / 1e9))

print("\n## Experiment 2b: taihulight, storage aged 5x, 8 of 80 static forwarding nodes 10x slower (three days)\n")
print("Mean I/O time of the I/O-intensive jobs (s), median of three days (spread):\n")
print("| machine | placement | FFM | DFRA | detected | remaps (FFM / DFRA) |")
print("|---|---|---|---|---|---|")
for case in ("healthy", "slow", "detect"):
    for pl in ("rr", "perf"):
        v = {"ffm": [], "dfra": []}
        det, rem = [], []
        for d in sorted(glob.glob(os.path.join(out, "exp2", "day-*"))):
            f = os.path.join(d, "%s-%s" % (case, pl), "summary.json")
            if not os.path.exists(f):
                continue
            s = load(f)
            for p in v:
                v[p].append(s[p]["intensive_mean_io_s"])
            det.append(s.get("dfra_detected", 0))
            rem.append("%d / %d" % (s.get("ffm_remaps", 0), s.get("dfra_remaps", 0)))
        if v["ffm"]:
            name = {"healthy": "healthy forwarding", "slow": "8 fail-slow, no detection", "detect": "8 fail-slow, detection"}[case]
            print("| %s | %s | %.0f (%s) | %.0f (%s) | %s | %s |" % (name, pl, med(v["ffm"]), spread(v["ffm"]), med(v["dfra"]), spread(v["dfra"]),
                  "-" if case != "detect" else "%s of 8" % "/".join(str(x) for x in det), ", ".join(rem) if case == "detect" else "-"))

print("\n## Experiment 4: forwarding nodes against job I/O time (taihulight, three days each)\n")
print("| forwarding nodes | FFM mean I/O (s) | DFRA mean I/O (s) | FFM mean I/O of I/O-intensive jobs (s) | DFRA | DFRA mean fwds per job |")
print("|---|---|---|---|---|---|")
for n in sorted(glob.glob(os.path.join(out, "exp4", "fwds-*")), key=lambda p: int(p.split("-")[-1])):
    v = {"ffm": [], "dfra": [], "ffmi": [], "dfrai": [], "fw": []}
    for d in sorted(glob.glob(os.path.join(n, "day-*"))):
        s = load(os.path.join(d, "summary.json"))
        v["ffm"].append(s["ffm"]["mean_io_s"])
        v["dfra"].append(s["dfra"]["mean_io_s"])
        v["fw"].append(s["dfra"]["mean_fwds"])
        for p in ("ffm", "dfra"):
            v[p + "i"].append(s[p]["intensive_mean_io_s"])
    print("| %s | %.0f (%s) | %.0f (%s) | %.0f (%s) | %.0f (%s) | %.1f |" % (
        n.split("-")[-1], med(v["ffm"]), spread(v["ffm"]), med(v["dfra"]), spread(v["dfra"]),
        med(v["ffmi"]), spread(v["ffmi"]), med(v["dfrai"]), spread(v["dfrai"]), med(v["fw"])))

print("\n## Speed and size: the whole 92-day log (18,066 jobs), DFRA, machines of taihulight's shape\n")
print("| compute nodes | events | wall (s) | events/s | peak RSS (MiB) |")
print("|---|---|---|---|---|")
for t in sorted(glob.glob(os.path.join(out, "scale-*.time")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0])):
    n = re.findall(r"\d+", os.path.basename(t))[0]
    wall, rss = open(t).read().split()[-2:]
    txt = open(os.path.join(out, "scale-%s.txt" % n)).read()
    ev = int(re.search(r"\((\d+) events", txt).group(1))
    print("| %s | %d | %s | %.0f | %.0f |" % (n, ev, wall, ev / float(wall), int(rss) / 1024))

if check:
    bad = []
    for c in rows:
        if c["max_speedup"] < 2:
            bad.append("DFRA sped no job up 2× (max %.2f)" % c["max_speedup"])
        if c["slower"] > 0.05 * c["jobs"]:
            bad.append("DFRA slowed %d of %d jobs by > 10 %%" % (c["slower"], c["jobs"]))
    if not rows:
        bad.append("no experiment 1 output")
    if bad:
        print("CHECK FAILED: " + "; ".join(bad))
        sys.exit(1)
    print("check passed")
