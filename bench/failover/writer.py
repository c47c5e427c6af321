#!/usr/bin/env python3
"""The writer of bench/failover/run.sh: makes 4 KiB files in DIR, each
written and fsynced, until killed, printing one JSON line per file (its
start, seconds taken, error if any).

    writer.py DIR > ops.jsonl
    writer.py --check DIR ops.jsonl trials.jsonl   # every acknowledged file reads back; the operations around each trial
"""
import json
import os
import signal
import sys
import time


def content(i):
    return (b"%08d" % i) * 512


def write(d):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    i = 0
    while True:
        start = time.time()
        err = None
        try:
            with open(os.path.join(d, "f%06d" % i), "wb") as f:
                f.write(content(i))
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            err = str(e)
        print(json.dumps({"i": i, "start": start, "s": round(time.time() - start, 4), "err": err}), flush=True)
        i += 1


def check(d, ops, trials):
    ops = [json.loads(l) for l in open(ops) if l.strip()]
    trials = [json.loads(l) for l in open(trials) if l.strip()]
    bad = []
    for o in ops:
        if o["err"] is None:
            try:
                with open(os.path.join(d, "f%06d" % o["i"]), "rb") as f:
                    if f.read() != content(o["i"]):
                        bad.append(o["i"])
            except OSError:
                bad.append(o["i"])
    around = []
    for t in trials:  # the operations that started in the second before a kill or were in flight at it
        at = t["at"]
        near = [o for o in ops if o["start"] <= at < o["start"] + o["s"]]
        around.append({"trial": t["trial"], "in_flight": len(near), "errors": sum(1 for o in near if o["err"]),
                       "longest_s": max((o["s"] for o in near), default=0)})
    out = {"summary": True, "ops": len(ops), "acknowledged": sum(1 for o in ops if o["err"] is None),
           "errors": sorted({o["err"] for o in ops if o["err"]}), "lost": bad, "around": around,
           "takeover_s": sorted(t["takeover_s"] for t in trials)}
    print(json.dumps(out))
    if bad:
        sys.exit("acknowledged files lost or wrong: %s" % bad[:10])


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(*sys.argv[2:5])
    else:
        write(sys.argv[1])
