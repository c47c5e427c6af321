#!/usr/bin/env python3
"""How a tmpfs mounted huge=within_size (the mem tier's, cluster/memfs.go)
takes a 1 MiB write that comes in pieces: the folios it allocates, by size,
for 16 MiB written a mebibyte at a time (the kernel's per-size shmem_alloc
counters), whole, as a small head and the rest (a chunk write spliced from
two pipes: docs/benchmarks.md, "What the four-stream new files' spread is
not"), and the same with the file's size set first. Root; mounts its own
tmpfs on a temporary directory and unmounts it.

    python3 bench/folioladder.py
"""
import glob
import os
import subprocess
import tempfile

MB = 1 << 20


def counts():
    return {d.rsplit("-", 1)[1]: int(open(d + "/stats/shmem_alloc").read())
            for d in glob.glob("/sys/kernel/mm/transparent_hugepage/hugepages-*kB")}


def run(dir, name, pre_size, pieces):
    c0 = counts()
    fd = os.open(os.path.join(dir, name), os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
    if pre_size:
        os.ftruncate(fd, pre_size)
    for mb in range(16):
        pos = 0
        for p in pieces:
            os.pwrite(fd, b"x" * p, mb * MB + pos)
            pos += p
    os.close(fd)
    os.unlink(os.path.join(dir, name))
    c1 = counts()
    got = {k: c1[k] - c0[k] for k in sorted(c0, key=lambda s: int(s[:-2])) if c1[k] != c0[k]}
    print(f"{name:32} {got}")


def main():
    dir = tempfile.mkdtemp(prefix="sluice-folios.")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "huge=within_size", "tmpfs", dir], check=True)
    try:
        run(dir, "whole", 0, [MB])
        run(dir, "4 KiB, then the rest", 0, [4096, MB - 4096])
        run(dir, "the rest, then 4 KiB", 0, [MB - 4096, 4096])
        run(dir, "4 KiB, then the rest, size set", 16 * MB, [4096, MB - 4096])
    finally:
        subprocess.run(["umount", dir], check=True)
        os.rmdir(dir)


if __name__ == "__main__":
    main()
