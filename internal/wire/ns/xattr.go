package ns

import "github.com/sluice-hpc/sluice/internal/wire"

// XattrReq is an extended attribute operation on inode Ino (since 2.3):
// Name for get, set and remove; Value and Flags (XattrCreate,
// XattrReplace) for set.
type XattrReq struct {
	Head
	Ino   uint64
	Name  string
	Value []byte
	Flags uint32
}

// setxattr(2)'s flags, and the kernel's.
const (
	XattrCreate  = 1 // fail with EEXIST if the attribute exists
	XattrReplace = 2 // fail with ENODATA if it does not
	// XattrKillSgid (since 2.4): setting an access ACL clears the
	// set-group-ID bit (the caller is not in the file's group and lacks
	// CAP_FSETID; FUSE's SETXATTR_ACL_KILL_SGID)
	XattrKillSgid = 1 << 8
)

// Fields implements wire.Message.
func (r *XattrReq) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &r.Head)
	c.Uint64(2, &r.Ino)
	c.String(3, &r.Name)
	c.Bytes(4, &r.Value)
	c.Uint32(5, &r.Flags)
}

// Inodes implements Request.
func (r *XattrReq) Inodes() (uint64, uint64, uint64) { return r.Ino, 0, 0 }

// XattrRep is an attribute's value (get) or the names of an inode's
// attributes (list).
type XattrRep struct {
	Value []byte
	Names []string
	Feed  uint64 // the change feed's position after a set or remove
}

// Fields implements wire.Message.
func (r *XattrRep) Fields(c *wire.Codec) {
	c.Bytes(1, &r.Value)
	c.Strings(2, &r.Names)
	c.Uint64(3, &r.Feed)
}

// SetFeed implements the service's feed replies.
func (r *XattrRep) SetFeed(pos uint64) { r.Feed = pos }
