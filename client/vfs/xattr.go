package vfs

import (
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
	v.dc.ForgetFile(ino) // its ctime changed
	return err
}

// Removexattr removes extended attribute name of ino.
func (v *FS) Removexattr(c Cred, ino uint64, name string) error {
	_, err := call(v, c, ns.Removexattr, &ns.XattrReq{Ino: ino, Name: name})
	v.dc.ForgetFile(ino)
	return err
}
