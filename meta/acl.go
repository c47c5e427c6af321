package meta

import (
	"encoding/binary"
	"syscall"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// POSIX ACLs. An inode's access and default ACLs are its extended
// attributes system.posix_acl_access and system.posix_acl_default, in
// Linux's xattr form (a version, then tag, permissions and id per entry);
// the kernel checks permissions against them (the mount negotiates FUSE's
// POSIX_ACL: it asks for an inode's access ACL when mode bits alone do
// not decide) and leaves to the file system what Linux's file systems do
// themselves, done here as posix_acl_* does in Linux:
//   - setting an access ACL sets the mode's permission bits from it
//     (owner, mask or group, other), and one that says no more than the
//     mode is not kept;
//   - a chmod sets the access ACL's owner, mask (or group) and other
//     entries from the new mode;
//   - a file or directory made in a directory with a default ACL gets
//     that ACL as its access ACL, cut to the mode asked for (the umask is
//     not applied), and a directory gets it as its default ACL too;
//   - a default ACL is for directories only (EACCES otherwise).
// A directory with a default ACL is not delegated to a mount (its creates
// need the inheritance), and setting one recalls a delegation.

const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
)

// ACL entry tags (linux/posix_acl.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// parseACL decodes and checks an ACL in xattr form: one owner, group and
// other entry, a mask if there are named entries, entries in tag then id
// order, no id twice.
func parseACL(v []byte) ([]aclEntry, error) {
	if len(v) < 4 || binary.LittleEndian.Uint32(v) != 2 || (len(v)-4)%8 != 0 {
		return nil, errno(syscall.EINVAL, "ACL of %d bytes: not version 2 entries", len(v))
	}
	var es []aclEntry
	counts := map[uint16]int{}
	for p := v[4:]; len(p) > 0; p = p[8:] {
		e := aclEntry{binary.LittleEndian.Uint16(p), binary.LittleEndian.Uint16(p[2:]), binary.LittleEndian.Uint32(p[4:])}
		if e.perm&^7 != 0 {
			return nil, errno(syscall.EINVAL, "ACL entry with permissions %o", e.perm)
		}
		switch e.tag {
		case aclUserObj, aclGroupObj, aclMask, aclOther, aclUser, aclGroup:
		default:
			return nil, errno(syscall.EINVAL, "ACL entry with tag %#x", e.tag)
		}
		if n := len(es); n > 0 {
			prev := es[n-1]
			if e.tag < prev.tag || e.tag == prev.tag && (e.tag != aclUser && e.tag != aclGroup || e.id <= prev.id) {
				return nil, errno(syscall.EINVAL, "ACL entries out of order or repeated")
			}
		}
		counts[e.tag]++
		es = append(es, e)
	}
	if counts[aclUserObj] != 1 || counts[aclGroupObj] != 1 || counts[aclOther] != 1 ||
		counts[aclUser]+counts[aclGroup] > 0 && counts[aclMask] != 1 {
		return nil, errno(syscall.EINVAL, "ACL without its owner, group, other or mask entry")
	}
	return es, nil
}

func encodeACL(es []aclEntry) []byte {
	v := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range es {
		v = binary.LittleEndian.AppendUint16(v, e.tag)
		v = binary.LittleEndian.AppendUint16(v, e.perm)
		v = binary.LittleEndian.AppendUint32(v, e.id)
	}
	return v
}

// aclMode returns the permission bits es gives (owner, mask or group,
// other) and whether es says no more than them (posix_acl_equiv_mode).
func aclMode(es []aclEntry) (perm uint32, equiv bool) {
	equiv = true
	var group, mask uint32
	hasMask := false
	for _, e := range es {
		switch e.tag {
		case aclUserObj:
			perm |= uint32(e.perm) << 6
		case aclGroupObj:
			group = uint32(e.perm)
		case aclMask:
			mask, hasMask = uint32(e.perm), true
			equiv = false
		case aclOther:
			perm |= uint32(e.perm)
		default:
			equiv = false
		}
	}
	if hasMask {
		return perm | mask<<3, equiv
	}
	return perm | group<<3, equiv
}

// aclChmod sets es's owner, mask (or group) and other entries from mode
// (posix_acl_chmod).
func aclChmod(es []aclEntry, mode uint32) {
	hasMask := false
	for _, e := range es {
		hasMask = hasMask || e.tag == aclMask
	}
	for i := range es {
		switch e := &es[i]; {
		case e.tag == aclUserObj:
			e.perm = uint16(mode >> 6 & 7)
		case e.tag == aclMask, e.tag == aclGroupObj && !hasMask:
			e.perm = uint16(mode >> 3 & 7)
		case e.tag == aclOther:
			e.perm = uint16(mode & 7)
		}
	}
}

// aclCreate cuts a parent's default ACL es to mode for a new inode
// (posix_acl_create_masq): it returns the new inode's permission bits and
// whether its access ACL says more than them (to be kept).
func aclCreate(es []aclEntry, mode uint32) (uint32, bool) {
	notEquiv := false
	var groupObj, maskObj *aclEntry
	for i := range es {
		e := &es[i]
		switch e.tag {
		case aclUserObj:
			e.perm &= uint16(mode >> 6 & 7)
			mode &= uint32(e.perm)<<6 | ^uint32(0o700)
		case aclUser, aclGroup:
			notEquiv = true
		case aclGroupObj:
			groupObj = e
		case aclOther:
			e.perm &= uint16(mode & 7)
			mode &= uint32(e.perm) | ^uint32(0o7)
		case aclMask:
			maskObj = e
			notEquiv = true
		}
	}
	g := groupObj
	if maskObj != nil {
		g = maskObj
	}
	if g != nil {
		g.perm &= uint16(mode >> 3 & 7)
		mode &= uint32(g.perm)<<3 | ^uint32(0o70)
	}
	return mode, notEquiv
}

// inheritACLLocked gives new inode n, made in directory parent, the
// parent's default ACL, if it has one: its access ACL cut to the mode
// asked for (unmasked: its permission bits before the caller's umask,
// which a default ACL replaces), its permission bits from that, and for a
// directory the default ACL itself, all into b. Caller holds mu.
func (s *Service) inheritACLLocked(b *engine.Batch, parent uint64, n *inode, unmasked uint32) error {
	if n.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return nil
	}
	def, err := s.e.Get(xattrKey(parent, aclDefault))
	if err == engine.ErrNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	es, err := parseACL(def)
	if err != nil {
		return err
	}
	perm, keep := aclCreate(es, unmasked&0o777)
	n.Mode = n.Mode&^0o777 | perm
	if keep {
		b.Set(xattrKey(n.Ino, aclAccess), encodeACL(es))
	}
	if isDir(n.Mode) {
		b.Set(xattrKey(n.Ino, aclDefault), def)
	}
	return nil
}

// hasDefaultACL reports whether directory dir has a default ACL (its
// creates need the inheritance: it is not delegated).
func (s *Service) hasDefaultACL(dir uint64) bool {
	_, err := s.e.Get(xattrKey(dir, aclDefault))
	return err == nil
}

// setACLLocked checks ACL value of attribute name for inode n and applies
// it: an access ACL sets n's permission bits (and is dropped, nil, if it
// says no more than them); a default ACL is for directories only. It
// returns the value to keep. Caller holds mu.
func setACLLocked(n *inode, name string, value []byte) ([]byte, error) {
	es, err := parseACL(value)
	if err != nil {
		return nil, err
	}
	if name == aclDefault {
		if !isDir(n.Mode) {
			return nil, errno(syscall.EACCES, "a default ACL is for directories")
		}
		return value, nil
	}
	perm, equiv := aclMode(es)
	n.Mode = n.Mode&^0o777 | perm
	if equiv {
		return nil, nil
	}
	return value, nil
}

// chmodACLLocked sets ino's access ACL, if it has one, from its new mode
// into b. Caller holds mu.
func (s *Service) chmodACLLocked(b *engine.Batch, ino uint64, mode uint32) error {
	v, err := s.e.Get(xattrKey(ino, aclAccess))
	if err == engine.ErrNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	es, err := parseACL(v)
	if err != nil {
		return err
	}
	aclChmod(es, mode)
	b.Set(xattrKey(ino, aclAccess), encodeACL(es))
	return nil
}
