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


if __name__ == "__main__":
    main(sys.argv[1])
