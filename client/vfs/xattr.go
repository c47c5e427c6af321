package vfs

import (
	"strings"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// Getxattr returns extended attribute name of ino (meta/xattr.go).
func (v *FS) Getxattr(c Cred, ino uint64, name string) ([]byte, error) {
	r, err := call(v, c, ns.Getxattr, &ns.XattrReq{Ino: ino, Name: name})
	if err != nil {
		return nil, err
	}
	return r.Value, nil
}

// Listxattr returns the names of ino's extended attributes.
func (v *FS) Listxattr(c Cred, ino uint64) ([]string, error) {
	r, err := call(v, c, ns.Listxattr, &ns.XattrReq{Ino: ino})
	if err != nil {
		return nil, err
	}
	return r.Names, nil
}

// Setxattr sets extended attribute name of ino to value; flags are
// setxattr(2)'s (ns.XattrCreate, ns.XattrReplace).
func (v *FS) Setxattr(c Cred, ino uint64, name string, value []byte, flags uint32) error {
	if value == nil {
		value = []byte{}
	}
	if name == "system.posix_acl_default" {
		v.wb.GiveBack(ino)
	}
	_, err := call(v, c, ns.Setxattr, &ns.XattrReq{Ino: ino, Name: name, Value: value, Flags: flags})
	v.forgetAttrs(ino, name)
	return err
}

// Removexattr removes extended attribute name of ino.
func (v *FS) Removexattr(c Cred, ino uint64, name string) error {
	_, err := call(v, c, ns.Removexattr, &ns.XattrReq{Ino: ino, Name: name})
	v.forgetAttrs(ino, name)
	return err
}

// forgetAttrs drops the attributes cached of ino after a change of its
// attribute name: its ctime changed, and an access ACL changes the mode
// of a directory too (whose attributes the directory cache keeps).
func (v *FS) forgetAttrs(ino uint64, name string) {
	v.dc.ForgetFile(ino)
	if strings.HasPrefix(name, "system.posix_acl_") {
		v.dc.ForgetDir(ino)
	}
}
