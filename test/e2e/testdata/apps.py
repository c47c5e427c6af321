"""Programs that share files between nodes through locks (issue 69 item 7),
run by TestApplications on two mounts of one cluster (argv: their
directories) standing for two nodes: SQLite with its rollback journal,
writers on both mounts at once; SQLite in WAL mode across the mounts;
h5py with HDF5's default file locking; git. Any mismatch fails an assert
(exit status 1)."""
import multiprocessing as mp
import os
import sqlite3
import subprocess
import sys
import time

import h5py
import numpy as np

a, b = sys.argv[1], sys.argv[2]


def step(what, t0):
    print(f'{what}: ok ({time.time() - t0:.1f} s)', flush=True)


# SQLite, rollback journal: four writers, two on each mount, each
# transaction an insert and a count (a read the next holder must see)
t0 = time.time()
db = os.path.join(a, 'rollback.db')
c = sqlite3.connect(db)
c.execute('create table t(w int, i int, v text)')
c.commit()
c.close()


def rollback_writer(w, root, n):
    c = sqlite3.connect(os.path.join(root, 'rollback.db'), timeout=60)
    for i in range(n):
        with c:
            c.execute('insert into t values(?,?,?)', (w, i, 'x' * 200))
            c.execute('select count(*) from t').fetchone()
    c.close()


ps = [mp.Process(target=rollback_writer, args=(w, [a, b][w % 2], 100)) for w in range(4)]
[p.start() for p in ps]
[p.join() for p in ps]
assert [p.exitcode for p in ps] == [0] * 4, [p.exitcode for p in ps]
for root in (a, b):
    c = sqlite3.connect(os.path.join(root, 'rollback.db'))
    assert c.execute('pragma integrity_check').fetchone()[0] == 'ok'
    per = dict(c.execute('select w, count(*) from t group by w').fetchall())
    assert per == {0: 100, 1: 100, 2: 100, 3: 100}, per
    c.close()
step('sqlite rollback journal, 4 writers over two mounts, 400 transactions', t0)

# SQLite in WAL mode across nodes: its wal-index is shared memory, which
# only one node sees, so a database shared between nodes is opened in
# exclusive locking mode (SQLite's rule for network file systems): a
# connection holds the database until it closes, and one on the other
# mount waits for it in its busy handler
t0 = time.time()
db = os.path.join(a, 'wal-nodes.db')


def wal_conn(root):
    c = sqlite3.connect(os.path.join(root, 'wal-nodes.db'), timeout=60, isolation_level=None)
    c.execute('pragma locking_mode=exclusive')
    c.execute('begin exclusive')
    c.execute('commit')
    assert c.execute('pragma journal_mode=wal').fetchone()[0] == 'wal'
    return c


c = wal_conn(a)
c.execute('create table t(w int, i int)')
c.close()


def wal_session(w, root, hold, got):
    c = wal_conn(root)
    got.put((w, time.time()))
    c.execute('begin')
    for i in range(100):
        c.execute('insert into t values(?,?)', (w, i))
    c.execute('commit')
    time.sleep(hold)
    c.close()


got = mp.Queue()
for rnd in range(3):
    first = mp.Process(target=wal_session, args=(2 * rnd, a, 1.0, got))
    first.start()
    w, t_first = got.get(timeout=60)
    second = mp.Process(target=wal_session, args=(2 * rnd + 1, b, 0, got))
    second.start()
    w2, t_second = got.get(timeout=60)
    first.join()
    second.join()
    assert first.exitcode == 0 and second.exitcode == 0
    # the second waited for the first to close (it held the database 1 s)
    assert t_second - t_first >= 0.9, t_second - t_first
for root in (b, a):
    c = wal_conn(root)
    assert c.execute('pragma integrity_check').fetchone()[0] == 'ok'
    assert c.execute('select count(*) from t').fetchone()[0] == 600
    c.close()
step('sqlite wal, exclusive locking, sessions alternating over two mounts with busy waits', t0)

# h5py: a chunked, compressed dataset; HDF5 locks the file while a writer
# has it open, and a second writer on the other mount is refused
t0 = time.time()
pa, pb = os.path.join(a, 'data.h5'), os.path.join(b, 'data.h5')
f = h5py.File(pa, 'w')
d = f.create_dataset('x', shape=(2000, 500), chunks=(100, 100), compression='gzip', dtype='f8')
try_open = 'import h5py,sys\ntry:\n  h5py.File(sys.argv[1], "a"); print("opened")\nexcept OSError as e: print("refused:", e)'
other = subprocess.run([sys.executable, '-c', try_open, pb], capture_output=True, text=True, timeout=60)
assert other.stdout.startswith('refused') and 'lock' in other.stdout, other
data = np.random.default_rng(7).random((2000, 500))
d[...] = data
f.close()
g = h5py.File(pb, 'r')
assert g['x'].compression == 'gzip' and g['x'].chunks == (100, 100)
assert np.array_equal(g['x'][...], data)
g.close()
g = h5py.File(pb, 'a')
g['x'][0, 0] = -1
g.close()
# HDF5 locks with flock, which FUSE gives up at the file's release, sent
# after close(2) has returned (docs/metadata.md, "Release at close"): the
# other mount may find it held for a moment, never for 2 s
t1, released = time.time(), None
while released is None:
    try:
        g = h5py.File(pa, 'r')
        released = time.time() - t1
    except BlockingIOError:
        assert time.time() - t1 < 2, 'the other mount still holds the HDF5 lock 2 s after its close'
        time.sleep(0.01)
with g:
    assert g['x'][0, 0] == -1 and np.array_equal(g['x'][1:], data[1:])
step('h5py: chunked gzip dataset, a second writer refused, read and appended on the other mount (the lock free %.0f ms after the close)' % (released * 1000), t0)

# git: commits, gc and fsck on one mount, a clone on the other
t0 = time.time()
env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@x', GIT_COMMITTER_NAME='t', GIT_COMMITTER_EMAIL='t@x')


def git(*args, cwd=None):
    r = subprocess.run(['git', *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


repo = os.path.join(a, 'repo')
git('init', '-q', repo)
for i in range(20):
    with open(os.path.join(repo, f'f{i % 5}.txt'), 'a') as fh:
        fh.write(f'line {i}\n' * 100)
    git('add', '-A', cwd=repo)
    git('commit', '-q', '-m', f'commit {i}', cwd=repo)
git('gc', '-q', cwd=repo)
git('fsck', '--strict', cwd=repo)
clone = os.path.join(b, 'clone')
git('clone', '-q', os.path.join(b, 'repo'), clone)
git('fsck', '--strict', cwd=clone)
assert git('rev-list', '--count', 'HEAD', cwd=clone).strip() == '20'
assert open(os.path.join(clone, 'f4.txt')).read() == open(os.path.join(repo, 'f4.txt')).read()
step('git: 20 commits, gc, fsck, a clone on the other mount', t0)
