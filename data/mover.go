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

// copyJob is one OpMoveCopy.
type copyJob struct {
	s          *Server
	m          *wire.Msg
	src, dst   wire.ChunkLoc
	addr       map[uint64]string
	unit, size int64 // stripe unit, chunk size
}

func (j *copyJob) call(ctx context.Context, id uint64, req *wire.Msg, payload, into []byte) (*wire.Msg, error) {
	addr, ok := j.addr[id]
	if !ok {
		return nil, rpc.Errorf(syscall.EINVAL, "migration names data server %d without its address", id)
	}
	req.Ino, req.Idx, req.ChunkSize, req.Handle, req.Who = j.m.Ino, j.m.Idx, j.m.ChunkSize, j.m.Handle, MigrationWho
	resp, _, err := j.s.peers.get(addr).Call(ctx, req, payload, into)
	if err != nil {
		return nil, fmt.Errorf("migration of chunk %d of inode %d: %w", j.m.Idx, j.m.Ino, err)
	}
	return resp, nil
}

// moveCopy copies chunk m.Idx of m.Ino from m.Chunks[0] to m.Chunks[1]
// (OpMoveCopy): begin at the sources, copy, stop the sources, copy what
// was written meanwhile, fsync the destinations. It returns the chunk's
// length, or with MoveClean (the destination has the chunk's bytes
// already: only what is written meanwhile is copied) the bytes copied.
func (s *Server) moveCopy(ctx context.Context, m *wire.Msg) (int64, error) {
	if len(m.Chunks) != 2 || len(m.Chunks[0].Servers) == 0 || len(m.Chunks[1].Servers) == 0 {
		return 0, rpc.Errorf(syscall.EINVAL, "migration needs a source and a destination group")
	}
	j := &copyJob{s: s, m: m, src: m.Chunks[0], dst: m.Chunks[1], addr: map[uint64]string{},
		unit: int64(m.StripeUnit), size: int64(m.ChunkSize)}
	if j.size <= 0 || j.unit <= 0 || j.unit > j.size {
		return 0, rpc.Errorf(syscall.EINVAL, "migration: chunk size %d, stripe unit %d", j.size, j.unit)
	}
	for _, si := range m.Servers {
		j.addr[si.ID] = si.Addr
	}
	gs := len(j.src.Servers)
	var end int64
	for i, id := range j.src.Servers {
		r, err := j.call(ctx, id, &wire.Msg{Op: wire.OpMoveBegin}, nil, nil)
		if err != nil {
			return 0, err
		}
		end = max(end, layout.ChunkLen(i, gs, j.unit, int64(r.Size)))
	}
	s.faults.Pass(ctx, s.cfg.Log, "move-begun")
	clean := m.Flags&wire.MoveClean != 0
	var copied int64
	if !clean {
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
		r, err := j.call(ctx, id, &wire.Msg{Op: wire.OpMoveStop}, nil, nil)
		if err != nil {
			return 0, err
		}
		if r.Flags&wire.MoveCut != 0 {
			return 0, rpc.Errorf(syscall.EAGAIN, "chunk %d of inode %d was truncated during its migration", m.Idx, m.Ino)
		}
		end2 = max(end2, layout.ChunkLen(i, gs, j.unit, int64(r.Size)))
		for _, e := range r.Entries {
			runs = append(runs, layout.Logical(i, gs, j.unit, int64(e.Ino), int64(e.Mode))...)
		}
	}
	if end2 < end {
		return 0, rpc.Errorf(syscall.EAGAIN, "chunk %d of inode %d shrank during its migration", m.Idx, m.Ino)
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
		if _, err := j.call(ctx, id, &wire.Msg{Op: wire.OpChunkSync}, nil, nil); err != nil {
			return 0, err
		}
	}
	if clean {
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
		req := &wire.Msg{Op: wire.OpChunkRead, Offset: uint64(pc.LocalOff), Size: uint64(pc.Len),
			Gen: j.src.Gen, Trunc: j.m.Trunc, Flags: wire.MoveRead}
		if _, err := j.call(ctx, j.src.Servers[pc.Member], req, nil, b[pc.BufOff:pc.BufOff+pc.Len]); err != nil {
			return err
		}
	}
	return nil
}

// write writes b at the chunk's logical offset off into the destinations.
func (j *copyJob) write(ctx context.Context, off int64, b []byte) error {
	gd := len(j.dst.Servers)
	for _, pc := range layout.Pieces(off, int64(len(b)), gd, j.unit) {
		req := &wire.Msg{Op: wire.OpChunkWrite, Offset: uint64(pc.LocalOff), Size: uint64(pc.Len),
			Cap: uint64(layout.LocalSize(pc.Member, gd, j.unit, j.size)), Gen: j.dst.Gen, Trunc: j.m.Trunc}
		if _, err := j.call(ctx, j.dst.Servers[pc.Member], req, b[pc.BufOff:pc.BufOff+pc.Len], nil); err != nil {
			return err
		}
	}
	return nil
}
