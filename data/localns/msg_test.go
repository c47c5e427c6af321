package localns

import (
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// tmsg is a request as these tests write them: one struct with the
// fields of every operation they send, made into the operation's typed
// request by req.
type tmsg struct {
	Op             wire.Op
	Ino, Parent    uint64
	NewParent      uint64
	Name, NewName  string
	Target         string
	Mode, Uid, Gid uint32
	Excl, Local    bool
	Mask           uint32
	Offset, Size   uint64
	Mtime          int64
	Who            wire.Who
}

// tres is an answer as these tests read it.
type tres struct {
	Attr    *wire.Attr
	Entries []wire.DirEntry
	Size    uint64
}

func (m *tmsg) req() ns.Request {
	h := ns.Head{Who: m.Who, Local: m.Local}
	switch m.Op {
	case ns.OpLookup, ns.OpUnlink, ns.OpRmdir:
		return &ns.NameReq{Head: h, Parent: m.Parent, Name: m.Name}
	case ns.OpGetattr, ns.OpReadlink:
		return &ns.InoReq{Head: h, Ino: m.Ino}
	case ns.OpSetattr:
		return &ns.SetattrReq{Head: h, Ino: m.Ino, Mask: m.Mask, Mode: m.Mode, Uid: m.Uid, Gid: m.Gid, Size: m.Size, Mtime: m.Mtime}
	case ns.OpMknod:
		return &ns.MknodReq{Head: h, Parent: m.Parent, Name: m.Name, Mode: m.Mode, Uid: m.Uid, Gid: m.Gid, Excl: m.Excl}
	case ns.OpMkdir:
		return &ns.MkdirReq{Head: h, Parent: m.Parent, Name: m.Name, Mode: m.Mode, Uid: m.Uid, Gid: m.Gid}
	case ns.OpLink:
		return &ns.LinkReq{Head: h, Ino: m.Ino, NewParent: m.NewParent, NewName: m.NewName}
	case ns.OpRename:
		return &ns.RenameReq{Head: h, Parent: m.Parent, Name: m.Name, NewParent: m.NewParent, NewName: m.NewName}
	case ns.OpReaddir:
		return &ns.ReaddirReq{Head: h, Ino: m.Ino, After: m.Name, Max: int(m.Size)}
	case ns.OpRead, ns.OpWrite:
		return &ns.IOReq{Head: h, Ino: m.Ino, Off: m.Offset, Len: m.Size}
	}
	panic("tmsg: no operation " + m.Op.String())
}

// call sends m (payload: a write's data) to n's operations.
func call(t *testing.T, n *NS, m *tmsg, payload []byte) (*tres, []byte, error) {
	t.Helper()
	f := n.Ops()[m.Op]
	if f == nil {
		return nil, nil, syscall.ENOSYS
	}
	rep, out, err := f(m.req(), payload)
	if err != nil {
		return nil, nil, err
	}
	r := &tres{}
	switch x := rep.(type) {
	case *ns.EntryRep:
		r.Attr = x.Attr
	case *ns.AttrRep:
		r.Attr = x.Attr
	case *ns.ReaddirRep:
		r.Entries = x.Entries
	case *ns.IORep:
		r.Size = x.Len
	}
	return r, out, nil
}

func must(t *testing.T, n *NS, m *tmsg, payload []byte) (*tres, []byte) {
	t.Helper()
	r, p, err := call(t, n, m, payload)
	if err != nil {
		t.Fatalf("%s %q: %v", m.Op, m.Name, err)
	}
	return r, p
}
