"""What the live-against-simulated reports of bench/sim share: the
agreement bar and reading a results file named on the command line."""
import json
import sys


def agrees(live, sim):
    """The validation's bar: within 15 % or 10 ms."""
    return abs(sim - live) <= max(0.15 * live, 0.010)


def load_args():
    """(--check given, the rows of the JSON Lines file named first)."""
    args = sys.argv[1:]
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    return check, [json.loads(l) for l in open(args[0]) if l.strip()]
