"""MPI-IO through ROMIO as IOR -a MPIIO does it (issue 69 item 7), run by
TestApplications with mpirun --mca io romio321, ranks split over two
mounts of one cluster (argv: their directories) standing for two nodes.
Every rank writes a block per segment, segment s holding every rank's
block in rank order, so a rank's blocks are strided in the file (a vector
file view, IOR's -s segments): once with collective buffering
(write_at_all: aggregators gather and write), once independently with
ROMIO's data sieving (write_at: each rank reads the region spanning its
blocks, changes its own and writes the region back under an fcntl lock,
which on two nodes is only safe with locks across them). Each time the
file is read back whole on the other mount and through each rank's view;
a mismatch aborts every rank (exit status non-zero)."""
import os
import sys
import traceback

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
mounts = sys.argv[1:3]
path = os.path.join(mounts[rank % 2], 'mpiio.dat')
BLOCK, SEGS = 4096, 64  # IOR's -b (= -t) and -s


def pattern(r, s):
    return bytes((r * 131 + s * 7 + i) % 251 for i in range(BLOCK))


def check(label):
    comm.Barrier()
    if rank == 0:
        with open(os.path.join(mounts[1], 'mpiio.dat'), 'rb') as f:
            data = f.read()
        assert len(data) == size * SEGS * BLOCK, (label, len(data))
        for s in range(SEGS):
            for r in range(size):
                off = (s * size + r) * BLOCK
                assert data[off:off + BLOCK] == pattern(r, s), (label, 'segment', s, 'rank', r)
        print(f'{label}: {size} ranks over two mounts, {len(data)} bytes ok', flush=True)
    comm.Barrier()


def run():
    ftype = MPI.BYTE.Create_vector(SEGS, BLOCK, size * BLOCK).Commit()
    mine = b''.join(pattern(rank, s) for s in range(SEGS))
    cases = [('collective buffering (write_at_all)', {'romio_cb_write': 'enable', 'romio_cb_read': 'enable', 'cb_nodes': '2'}, True),
             ('independent with data sieving (write_at)', {'romio_ds_write': 'enable', 'romio_ds_read': 'enable', 'romio_cb_write': 'disable'}, False)]
    for label, hints, collective in cases:
        if rank == 0 and os.path.exists(path):
            os.remove(path)
        comm.Barrier()
        info = MPI.Info.Create()
        for k, v in hints.items():
            info.Set(k, v)
        fh = MPI.File.Open(comm, path, MPI.MODE_CREATE | MPI.MODE_RDWR, info)
        fh.Set_view(rank * BLOCK, MPI.BYTE, ftype)
        (fh.Write_at_all if collective else fh.Write_at)(0, mine)
        fh.Sync()
        fh.Close()
        check(label)
        fh = MPI.File.Open(comm, path, MPI.MODE_RDONLY, info)
        fh.Set_view(rank * BLOCK, MPI.BYTE, ftype)
        buf = bytearray(len(mine))
        (fh.Read_at_all if collective else fh.Read_at)(0, buf)
        fh.Close()
        assert bytes(buf) == mine, (label, 'read back through the view', rank)
    ftype.Free()


try:
    run()
except BaseException:
    traceback.print_exc()
    sys.stdout.flush()
    comm.Abort(1)
