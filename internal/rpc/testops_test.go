package rpc

import (
	"context"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// tmsg is the request and reply of the tests' operations.
type tmsg struct {
	Ino, Size uint64
	Name      string
	Flags     uint32
}

func (m *tmsg) Fields(c *wire.Codec) {
	c.Uint64(1, &m.Ino)
	c.Uint64(2, &m.Size)
	c.String(3, &m.Name)
	c.Uint32(4, &m.Flags)
}

// Class implements wire.Classed: a request of more than wire.SmallIOMax
// bytes is bulk.
func (m *tmsg) Class() wire.Class { return wire.IOClass(m.Size) }

// FileIno implements wire.OfFile.
func (m *tmsg) FileIno() uint64 { return m.Ino }

// The tests' operations.
var (
	tPing    = wire.Define[tmsg, tmsg](64001, "test-ping", wire.Admin)
	tWrite   = wire.Define[tmsg, tmsg](64002, "test-write", wire.Admin)
	tRead    = wire.Define[tmsg, tmsg](64003, "test-read", wire.Admin)
	tGetattr = wire.Define[tmsg, tmsg](64004, "test-getattr", wire.Admin)
	tUnlink  = wire.Define[tmsg, tmsg](64005, "test-unlink", wire.Admin)
	tFsync   = wire.Define[tmsg, tmsg](64006, "test-fsync", wire.Admin)
)

// tcall calls operation d with m and payload, the answer's payload in
// into if it fits.
func tcall(ctx context.Context, c *Client, d wire.Def[tmsg, tmsg], m *tmsg, payload, into []byte) (*tmsg, []byte, error) {
	return DoPayload(ctx, c, d, m, payload, into)
}

// echo answers: unlink fails (ENOENT), fsync sleeps Size ms, the others
// answer Ino+1 and the payload's size, with the payload back.
var echo = HandlerFunc(func(r *Request) {
	go func() {
		m := r.Req.(*tmsg)
		switch r.Op {
		case tUnlink.Op:
			r.ReplyErr(Errorf(syscall.ENOENT, "no such file %q", m.Name))
			return
		case tFsync.Op:
			time.Sleep(time.Duration(m.Size) * time.Millisecond)
		}
		out := append([]byte(nil), r.Payload...)
		r.Reply(&tmsg{Ino: m.Ino + 1, Size: uint64(len(r.Payload))}, out)
	}()
})
