#!/usr/bin/env python3
"""The writer of bench/failover/run.sh: a loop of the namespace and data
operations applications make, in DIR, until killed, printing one JSON line
per operation (its step, kind, start, seconds taken, error if any). Each
step makes f<i> (open with O_CREAT|O_EXCL, 4 KiB written), fsyncs and
closes it, stats it and renames it r<i>; every fifth step unlinks the file
of five steps before, every tenth lists the directory.

    writer.py DIR > ops.jsonl
    writer.py --check trials.jsonl DIR ops.jsonl [DIR ops.jsonl …]   # what was acknowledged is there;
                                                  # every operation in flight during each failover
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

    def op(i, kind, f):
        start = time.time()
        err = None
        try:
            out = f()
        except OSError as e:
            err, out = str(e), None
        print(json.dumps({"i": i, "op": kind, "start": start, "s": round(time.time() - start, 4), "err": err}), flush=True)
        return err is None, out

    i = 0
    while True:
        f, r = os.path.join(d, "f%06d" % i), os.path.join(d, "r%06d" % i)
        ok, fd = op(i, "create", lambda: os.open(f, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        if ok:
            op(i, "write", lambda: os.write(fd, content(i)))
            op(i, "fsync", lambda: os.fsync(fd))
            op(i, "close", lambda: os.close(fd))
            op(i, "stat", lambda: os.stat(f))
            op(i, "rename", lambda: os.rename(f, r))
        if i % 5 == 0 and i >= 5:
            op(i - 5, "unlink", lambda: os.unlink(os.path.join(d, "r%06d" % (i - 5))))
        if i % 10 == 0:
            op(i, "readdir", lambda: os.listdir(d))
        i += 1


def lost(d, ops):
    """The acknowledged operations of one writer whose effect is not in d."""
    by = {}
    for o in ops:
        by.setdefault(o["i"], {})[o["op"]] = o

    def acked(s, kind):
        return kind in s and s[kind]["err"] is None

    bad = []
    for i, s in sorted(by.items()):
        if not (acked(s, "create") and acked(s, "write") and acked(s, "fsync") and acked(s, "close")):
            continue  # not acknowledged: either way
        f, r = os.path.join(d, "f%06d" % i), os.path.join(d, "r%06d" % i)
        if acked(s, "unlink"):
            if os.path.exists(r):
                bad.append((d, i, "unlinked, still there"))
            continue
        if "unlink" in s:
            continue  # an unlink that failed: either way
        names = [r] if acked(s, "rename") else [f, r] if "rename" in s else [f]
        got = None
        for n in names:
            try:
                with open(n, "rb") as fh:
                    got = fh.read()
                break
            except OSError:
                pass
        if got != content(i):
            bad.append((d, i, "missing or wrong"))
    return bad


def check(trials, *writers):
    trials = [json.loads(l) for l in open(trials) if l.strip()]
    ops, bad = [], []
    for w, (d, path) in enumerate(zip(writers[::2], writers[1::2])):
        mine = [dict(json.loads(l), w=w) for l in open(path) if l.strip()]
        ops += mine
        bad += lost(d, mine)
    around = []
    kinds = {}
    for t in trials:  # every operation in flight from the kill until the service answered again
        at, end = t["at"], t["at"] + t["takeover_s"]
        near = sorted((o for o in ops if o["start"] < end and at < o["start"] + o["s"]), key=lambda o: o["start"])
        around.append({"trial": t["trial"], "in_flight": [
            {"writer": o["w"], "op": o["op"], "i": o["i"], "began_ms": round((o["start"] - at) * 1000, 1), "took_s": o["s"], "err": o["err"]}
            for o in near]})
        for o in near:
            k = kinds.setdefault(o["op"], {"in_flight": 0, "errors": 0, "took_s": []})
            k["in_flight"] += 1
            k["errors"] += o["err"] is not None
            k["took_s"].append(o["s"])
    for k in kinds.values():
        took = sorted(k.pop("took_s"))
        k["median_s"], k["longest_s"] = took[len(took) // 2], took[-1]
    out = {"summary": True, "ops": len(ops), "acknowledged": sum(1 for o in ops if o["err"] is None),
           "errors": sorted({o["op"] + ": " + o["err"] for o in ops if o["err"]}), "lost": bad, "around": around,
           "in_flight_by_op": kinds, "takeover_s": sorted(t["takeover_s"] for t in trials)}
    print(json.dumps(out))
    if bad:
        sys.exit("acknowledged operations lost or wrong: %s" % bad[:10])


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        check(*sys.argv[2:])
    else:
        write(sys.argv[1])
