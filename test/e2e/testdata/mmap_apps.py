"""Shared writable mappings on a sluice mount (issue 69 item 1), run by
TestApplications: a mapping coherent with read and write on one node, close-to-open
across two mounts (two nodes), and the programs that need it: SQLite in WAL
mode, numpy.memmap and LMDB, each with two processes at once. Any mismatch
fails an assert (exit status 1)."""
import mmap
import multiprocessing as mp
import os
import sqlite3
import sys

import lmdb
import numpy as np

a, b = sys.argv[1], sys.argv[2]
N = 1 << 20

# one node: stores seen by read() before msync, write() seen by the mapping
p = os.path.join(a, 'mapped')
with open(p, 'wb') as f:
    f.write(b'\0' * N)
fd = os.open(p, os.O_RDWR)
m = mmap.mmap(fd, N, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:5] = b'hello'
assert os.pread(fd, 5, 0) == b'hello', 'read() does not see a store before msync'
m.flush()
os.pwrite(fd, b'WORLD', 4096)
assert m[4096:4101] == b'WORLD', 'the mapping does not see a write()'
pat = bytes(range(256)) * (N // 256)
m[:] = pat
m.close()
os.close(fd)
print('one node: coherent')

# close-to-open across nodes: b maps what a stored, a reads what b stored
q = os.path.join(b, 'mapped')
fd = os.open(q, os.O_RDWR)
m = mmap.mmap(fd, N, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
assert m[:] == pat, 'the other node maps old bytes'
m[N - 3:N] = b'end'
m.flush()
m.close()
os.close(fd)
with open(p, 'rb') as f:
    got = f.read()
assert got[N - 3:] == b'end' and got[:N - 3] == pat[:N - 3], 'a read on the first node misses the other node\'s stores'
print('two nodes: close-to-open')

# SQLite in WAL mode, two writers at once
db = os.path.join(a, 'wal.db')
c = sqlite3.connect(db, timeout=60)
assert c.execute('pragma journal_mode=wal').fetchone()[0] == 'wal'
c.execute('create table t(k integer primary key, w int, v text)')
c.commit()
c.close()


def sqlite_writer(w):
    c = sqlite3.connect(db, timeout=60)
    for i in range(500):
        c.execute('insert into t(w, v) values (?, ?)', (w, 'x' * 100))
        if i % 10 == 9:
            c.commit()
    c.commit()
    c.close()


def run(target, n):
    ps = [mp.Process(target=target, args=(w,)) for w in range(n)]
    for x in ps:
        x.start()
    for x in ps:
        x.join()
        assert x.exitcode == 0, f'{target.__name__} failed'


run(sqlite_writer, 2)
c = sqlite3.connect(db)
assert c.execute('select count(*) from t').fetchone()[0] == 1000
assert c.execute('pragma integrity_check').fetchone()[0] == 'ok'
c.close()
print('sqlite wal: 1000 rows, integrity ok')

# numpy.memmap: written here, read and changed by another process
arr = os.path.join(a, 'arr.dat')
x = np.memmap(arr, dtype='float64', mode='w+', shape=(512, 512))
x[:] = np.arange(512 * 512).reshape(512, 512)
x.flush()
del x


def np_other(w):
    y = np.memmap(arr, dtype='float64', mode='r+', shape=(512, 512))
    # the rows neither process changes (the other's row may be -1 by now:
    # one node's mappings share its pages)
    assert float(y[2:].sum()) == float(np.arange(2 * 512, 512 * 512).sum())
    y[w, :] = -1
    y.flush()


run(np_other, 2)
y = np.memmap(arr, dtype='float64', mode='r', shape=(512, 512))
assert (y[0:2, :] == -1).all() and y[2, 0] == 2 * 512
print('numpy.memmap: ok')

# LMDB: two writer processes
env_dir = os.path.join(a, 'lmdb')


def lmdb_writer(w):
    e = lmdb.open(env_dir, map_size=1 << 26)
    for i in range(200):
        with e.begin(write=True) as txn:
            txn.put(b'%d-%d' % (w, i), b'v' * 200)
    e.close()


run(lmdb_writer, 2)
e = lmdb.open(env_dir, map_size=1 << 26)
with e.begin() as txn:
    assert txn.stat()['entries'] == 400
    assert txn.get(b'1-199') == b'v' * 200
e.close()
print('lmdb: 400 entries')
