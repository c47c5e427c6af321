"""Slowdown matrices of bench/dfra/pairwise.sh: row job's I/O time when run
together with the column job, over its I/O time alone."""
import json
import sys


def main(path):
    alone, paired, kinds = {}, {}, []
    for line in open(path):
        r = json.loads(line)
        t = r["run"]["Slowest"]
        if r["kind"] not in kinds:
            kinds.append(r["kind"])
        if r["with"] == "":
            alone[(r["mode"], r["kind"])] = t
        else:
            paired[(r["mode"], r["kind"], r["with"])] = t
    for mode in ("ffm", "dfra"):
        print(f"\n### {mode.upper()}: slowdown of the row job paired with the column job\n")
        print("| job \\ with | " + " | ".join(kinds) + " | alone (s) |")
        print("|---" * (len(kinds) + 2) + "|")
        worst = 0.0
        for a in kinds:
            cells = []
            for b in kinds:
                p, s = paired.get((mode, a, b)), alone.get((mode, a))
                if p and s:
                    x = p / s
                    worst = max(worst, x)
                    cells.append(f"{x:.2f}")
                else:
                    cells.append("-")
            s = alone.get((mode, a))
            print(f"| {a} | " + " | ".join(cells) + f" | {s / 1e9:.2f} |" if s else " | - |")
        print(f"\nworst slowdown under {mode.upper()}: {worst:.2f}")


def check(path):
    """Fails unless both modes ran every behaviour alone and every pair,
    with I/O times above zero and slowdowns in a sane range."""
    rows = [json.loads(l) for l in open(path)]
    kinds = sorted({r["kind"] for r in rows})
    got = {(r["mode"], r["kind"], r["with"]): r["run"]["Slowest"] for r in rows}
    bad = []
    for mode in ("ffm", "dfra"):
        for a in kinds:
            s = got.get((mode, a, ""))
            if not s or s <= 0:
                bad.append(f"{mode} {a} alone: {s}")
                continue
            for b in kinds:
                p = got.get((mode, a, b))
                if not p or not 0.2 <= p / s <= 50:
                    bad.append(f"{mode} {a} with {b}: {p} over {s}")
    if bad:
        sys.exit("dfra check failed:\n  " + "\n  ".join(bad))
    print(f"dfra check: {len(kinds)} behaviours, both modes, every pair, slowdowns in range")


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(sys.argv[2])
    else:
        main(sys.argv[1])
