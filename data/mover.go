package data

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/layout"
)

// The mover: the destination group's first member copies a chunk from
// the source group (move.go has the protocol). Source and destination may
// stripe differently; the copy goes through the chunk's logical bytes.

// copyBlock is how much of a chunk one copy step moves.
const copyBlock = 1 << 20

// MigrationWho is the identity migration traffic carries, so Beacon
// records it under its own job rather than under "no job".
var MigrationWho = wire.Who{Job: wire.MigrationJob, Rank: -1, App: "tag:sluice-tiering"}

// peers are connections to other data servers, by address.
type peers struct {
	secret  []byte
	timeout time.Duration
	mu      sync.Mutex // guards conns
	conns   map[string]*rpc.Client
}

func (p *peers) get(addr string) *rpc.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[addr]; c != nil {
		return c
	}
	if p.conns == nil {
		p.conns = map[string]*rpc.Client{}
	}
	c := rpc.NewClient(addr, p.secret, rpc.ClientOptions{Timeout: p.timeout, Name: "data server " + addr})
	p.conns[addr] = c
	return c
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// copyJob is one chunk.MoveCopy.
type copyJob struct {
	s          *Server
	q          *chunk.MoveCopyReq
	src, dst   wire.ChunkLoc
	addr       map[uint64]string
	unit, size int64 // stripe unit, chunk size
}

// call sends operation d of the copy to member id.
func call[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](ctx context.Context, j *copyJob, id uint64, d wire.Def[Q, R], req PQ, payload, into []byte) (PR, error) {
	addr, ok := j.addr[id]
	if !ok {
		return nil, rpc.Errorf(syscall.EINVAL, "migration names data server %d without its address", id)
	}
	rep, _, err := rpc.DoPayload[Q, R, PQ, PR](ctx, j.s.peers.get(addr), d, req, payload, into)
	if err != nil {
		return nil, fmt.Errorf("migration of chunk %d of inode %d: %w", j.q.Idx, j.q.Ino, err)
	}
	return rep, nil
}

// session is the migration's request to a source.
func (j *copyJob) session() *chunk.MoveReq {
	return &chunk.MoveReq{ID: j.q.ID, Session: j.q.Session, Who: MigrationWho}
}

// moveCopy copies chunk q.ID from q.From to q.To (chunk.MoveCopy): begin
// at the sources, copy, stop the sources, copy what was written
// meanwhile, fsync the destinations. It returns the chunk's length, or
// with Clean (the destination has the chunk's bytes already: only what is
// written meanwhile is copied) the bytes copied.
func (s *Server) moveCopy(ctx context.Context, q *chunk.MoveCopyReq) (int64, error) {
	if len(q.From.Servers) == 0 || len(q.To.Servers) == 0 {
		return 0, rpc.Errorf(syscall.EINVAL, "migration needs a source and a destination group")
	}
	j := &copyJob{s: s, q: q, src: q.From, dst: q.To, addr: map[uint64]string{},
		unit: int64(q.StripeUnit), size: int64(q.ChunkSize)}
	if j.size <= 0 || j.unit <= 0 || j.unit > j.size {
		return 0, rpc.Errorf(syscall.EINVAL, "migration: chunk size %d, stripe unit %d", j.size, j.unit)
	}
	for _, si := range q.Servers {
		j.addr[si.ID] = si.Addr
	}
	gs := len(j.src.Servers)
	var end int64
	for i, id := range j.src.Servers {
		r, err := call(ctx, j, id, chunk.MoveBegin, j.session(), nil, nil)
		if err != nil {
			return 0, err
		}
		end = max(end, layout.ChunkLen(i, gs, j.unit, int64(r.Len)))
	}
	s.faults.Pass(ctx, s.cfg.Log, "move-begun")
	var copied int64
	if !q.Clean {
		half := end / 2
		if err := j.copy(ctx, 0, half); err != nil {
			return 0, err
		}
		s.faults.Pass(ctx, s.cfg.Log, "move-copying")
		if err := j.copy(ctx, half, end-half); err != nil {
			return 0, err
		}
	}
	var runs []layout.Run
	var end2 int64
	for i, id := range j.src.Servers {
		r, err := call(ctx, j, id, chunk.MoveStop, j.session(), nil, nil)
		if err != nil {
			return 0, err
		}
		if r.Cut {
			return 0, rpc.Errorf(syscall.EAGAIN, "chunk %d of inode %d was truncated during its migration", q.Idx, q.Ino)
		}
		end2 = max(end2, layout.ChunkLen(i, gs, j.unit, int64(r.Len)))
		for _, w := range r.Written {
			runs = append(runs, layout.Logical(i, gs, j.unit, int64(w.Off), int64(w.Len))...)
		}
	}
	if end2 < end {
		return 0, rpc.Errorf(syscall.EAGAIN, "chunk %d of inode %d shrank during its migration", q.Idx, q.Ino)
	}
	if end2 > end {
		runs = append(runs, layout.Run{Off: end, Len: end2 - end})
	}
	for _, r := range runs {
		r.Len = min(r.Off+r.Len, end2) - r.Off
		if r.Len <= 0 {
			continue
		}
		if err := j.copy(ctx, r.Off, r.Len); err != nil {
			return 0, err
		}
		copied += r.Len
	}
	s.faults.Pass(ctx, s.cfg.Log, "move-stopped")
	for _, id := range j.dst.Servers {
		if _, err := call(ctx, j, id, chunk.Sync, &chunk.SyncReq{Ino: q.Ino, Who: MigrationWho}, nil, nil); err != nil {
			return 0, err
		}
	}
	if q.Clean {
		return copied, nil
	}
	return end2, nil
}

// copy copies the chunk's logical range [off, off+n) from the sources
// into the destinations a block at a time, reading the next block while
// the last one is written (a read and a write of each block in turn would
// move at half the slower device's speed).
func (j *copyJob) copy(ctx context.Context, off, n int64) error {
	if n <= 0 {
		return nil
	}
	type block struct {
		off int64
		b   []byte
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const depth = 2 // buffers: one written, one read
	free := make(chan []byte, depth)
	for i := 0; i < depth; i++ {
		free <- bufpool.Get(copyBlock)
	}
	full := make(chan block, depth)
	go func() {
		defer close(full)
		for o, left := off, n; left > 0; {
			var b []byte
			select {
			case b = <-free:
			case <-ctx.Done():
				return
			}
			l := min(left, copyBlock)
			full <- block{off: o, b: b[:l], err: j.read(ctx, o, b[:l])}
			o += l
			left -= l
		}
	}()
	var first error
	for bk := range full {
		if first == nil {
			first = bk.err
			if first == nil {
				first = j.write(ctx, bk.off, bk.b)
			}
			if first != nil {
				cancel()
			}
		}
		free <- bk.b[:cap(bk.b)]
	}
	for i := 0; i < depth; i++ {
		bufpool.Put(<-free)
	}
	return first
}

// read reads the chunk's logical range [off, off+len(b)) from the sources.
func (j *copyJob) read(ctx context.Context, off int64, b []byte) error {
	for _, pc := range layout.Pieces(off, int64(len(b)), len(j.src.Servers), j.unit) {
		req := &chunk.ReadReq{At: chunk.At{ID: j.q.ID, Off: uint64(pc.LocalOff), Len: uint64(pc.Len),
			Layout: j.src.Gen, Trunc: j.q.Trunc}, Session: j.q.Session, Who: MigrationWho}
		if _, err := call(ctx, j, j.src.Servers[pc.Member], chunk.Read, req, nil, b[pc.BufOff:pc.BufOff+pc.Len]); err != nil {
			return err
		}
	}
	return nil
}

// write writes b at the chunk's logical offset off into the destinations.
func (j *copyJob) write(ctx context.Context, off int64, b []byte) error {
	gd := len(j.dst.Servers)
	for _, pc := range layout.Pieces(off, int64(len(b)), gd, j.unit) {
		req := &chunk.WriteReq{At: chunk.At{ID: j.q.ID, Off: uint64(pc.LocalOff), Len: uint64(pc.Len),
			Layout: j.dst.Gen, Trunc: j.q.Trunc}, Reserve: uint64(layout.LocalSize(pc.Member, gd, j.unit, j.size)), Who: MigrationWho}
		if _, err := call(ctx, j, j.dst.Servers[pc.Member], chunk.Write, req, b[pc.BufOff:pc.BufOff+pc.Len], nil); err != nil {
			return err
		}
	}
	return nil
}
