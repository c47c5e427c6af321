// Package ns is the protocol of the namespace service: the operations
// the metadata service answers about files and directories, their request
// and reply types and their numbers (400-499). The operations not here yet
// still speak wire.Msg (docs/protocol.md); they move here one at a time.
// It must not know how the service keeps the namespace.
package ns

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// Operation numbers of the namespace service.
const (
	OpAccess   wire.Op = 400 + iota // a forwarding daemon's recent reads and writes of files
	OpActivity                      // a file's open/close history
)

// The operations, typed.
var (
	Access   = wire.Define[AccessReq, wire.Empty](OpAccess, "access", wire.Namespace)
	Activity = wire.Define[FileReq, wire.Activity](OpActivity, "activity", wire.Namespace)
)

// FileReq names a file.
type FileReq struct{ Ino uint64 }

// Fields implements wire.Message.
func (r *FileReq) Fields(c *wire.Codec) { c.Uint64(1, &r.Ino) }

// FileIno implements wire.OfFile.
func (r *FileReq) FileIno() uint64 { return r.Ino }

// AccessReq reports the files read or written through a forwarding
// daemon since its last report: each last accessed Ago before At (unix
// ns, the daemon's clock).
type AccessReq struct {
	At    int64
	Files []FileAccess
}

// Fields implements wire.Message.
func (r *AccessReq) Fields(c *wire.Codec) {
	c.Int64(1, &r.At)
	wire.List(c, 2, &r.Files)
}

// FileAccess is one file's last access.
type FileAccess struct {
	Ino uint64
	Ago time.Duration
}

// Fields implements wire.Message.
func (f *FileAccess) Fields(c *wire.Codec) {
	c.Uint64(1, &f.Ino)
	c.Duration(2, &f.Ago)
}
