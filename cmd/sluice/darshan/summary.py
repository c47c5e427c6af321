"""Summarise a Darshan log for `sluice profile import`.

Reads the POSIX module with pydarshan (PyPI package "darshan", whose wheel
bundles libdarshan-util) and prints one JSON object: what the log says the
application did. sluice turns it into a Beacon profile, with the same
classification as for jobs it monitored itself.
"""
import json
import sys

import darshan

SIZE_BINS = [  # Darshan's request size histogram bins → upper bound
    ("0_100", 100), ("100_1K", 1 << 10), ("1K_10K", 10 << 10), ("10K_100K", 100 << 10),
    ("100K_1M", 1 << 20), ("1M_4M", 4 << 20), ("4M_10M", 10 << 20), ("10M_100M", 100 << 20),
    ("100M_1G", 1 << 30), ("1G_PLUS", 1 << 40),
]


def main(path):
    r = darshan.DarshanReport(path, read_all=False)
    job = r.metadata["job"]
    exe = r.metadata.get("exe", "").split()
    out = {
        "Exe": exe[0].rsplit("/", 1)[-1] if exe else "",
        "Uid": int(job.get("uid", 0)),
        "Nprocs": int(job.get("nprocs", 1)),
        "RunTime": float(job.get("run_time", 0.0)),
        "Files": [],
        "Sizes": {},
    }
    if "POSIX" not in r.modules:
        print(json.dumps(out))
        return
    r.mod_read_all_records("POSIX")
    df = r.records["POSIX"].to_df()
    c, f = df["counters"], df["fcounters"]
    meta = 0
    for col in ("POSIX_OPENS", "POSIX_STATS", "POSIX_FSYNCS", "POSIX_SEEKS"):
        if col in c:
            meta += int(c[col].clip(lower=0).sum())
    out["MetaOps"] = meta
    for i in range(len(c)):
        row, frow = c.iloc[i], f.iloc[i]
        out["Files"].append({
            "Rank": int(row["rank"]),
            "Id": str(row["id"]),
            "ReadBytes": max(0, int(row["POSIX_BYTES_READ"])),
            "WriteBytes": max(0, int(row["POSIX_BYTES_WRITTEN"])),
            "Reads": max(0, int(row["POSIX_READS"])),
            "Writes": max(0, int(row["POSIX_WRITES"])),
            "IOTime": max(0.0, float(frow["POSIX_F_READ_TIME"]) + float(frow["POSIX_F_WRITE_TIME"])),
        })
    for name, bound in SIZE_BINS:
        n = 0
        for op in ("READ", "WRITE"):
            col = "POSIX_SIZE_%s_%s" % (op, name)
            if col in c:
                n += int(c[col].clip(lower=0).sum())
        if n:
            out["Sizes"][str(bound)] = n
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
