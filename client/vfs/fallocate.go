package vfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// fallocate(2)'s modes (linux/falloc.h).
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

// zeroPiece is how much of a range Fallocate zeroes per write.
const zeroPiece = 1 << 20

// Fallocate answers fallocate(2) for the n bytes at off of ino through
// handle fh. A range punched (PUNCH_HOLE, with KEEP_SIZE as Linux
// requires) or zeroed (ZERO_RANGE, with or without KEEP_SIZE) reads back
// as zeros: the mount writes them, so the range keeps its room on the
// tier rather than giving it back. Allocation ahead of writes (mode 0,
// KEEP_SIZE alone) is refused with EOPNOTSUPP: a tier's room is taken
// when a chunk is placed, not before (docs/tiering.md), so sluice cannot
// promise that later writes find it; glibc's posix_fallocate then writes
// the blocks itself, and ENOSPC, if any, comes then. Other modes
// (COLLAPSE_RANGE, INSERT_RANGE…) are EOPNOTSUPP.
func (v *FS) Fallocate(c Cred, ino, fh, off, n uint64, mode uint32) error {
	switch mode {
	case FallocPunchHole | FallocKeepSize, FallocZeroRange, FallocZeroRange | FallocKeepSize:
	default:
		return syscall.EOPNOTSUPP
	}
	if n == 0 || off+n < off {
		return syscall.EINVAL
	}
	if c.Uid != 0 {
		// as Linux's file_modified: set-user-ID goes, and set-group-ID
		// too unless the file is not group-executable and the caller is
		// in its group (the kernel leaves this to the file system with
		// HANDLE_KILLPRIV_V2, and sends no flag with an fallocate)
		if err := v.fallocKillPriv(c, ino); err != nil {
			return err
		}
	}
	end := off + n
	if mode&FallocKeepSize != 0 {
		a, err := v.GetAttr(c, ino)
		if err != nil {
			return err
		}
		end = min(end, a.Attr.Size) // past the end the file reads as zeros already
	}
	if end <= off {
		return nil
	}
	zeros := make([]byte, min(zeroPiece, end-off)) // never written to: a write in the background may keep it
	for o := off; o < end; {
		k := min(uint64(len(zeros)), end-o)
		if _, err := v.Write(c, ino, fh, o, zeros[:k:k], false, nil); err != nil {
			return err
		}
		o += k
	}
	return nil
}

// fallocKillPriv clears an unprivileged fallocate's caller's file's
// set-user-ID and set-group-ID bits by Linux's rule, if the file was seen
// with them.
func (v *FS) fallocKillPriv(c Cred, ino uint64) error {
	v.pmu.Lock()
	had := v.priv[ino]
	v.pmu.Unlock()
	if !had {
		return nil
	}
	a, err := v.GetAttr(c, ino)
	if err != nil {
		return err
	}
	mask := ns.SetKillPriv
	if !inGroup(c, a.Attr.Gid) {
		mask |= ns.SetKillSgid
	}
	return v.killPriv(c, ino, mask)
}

// inGroup says whether caller c is in group gid: its group, or one of
// its process's supplementary groups (/proc/PID/status).
func inGroup(c Cred, gid uint32) bool {
	if c.Gid == gid {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.Pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, g := range strings.Fields(rest) {
				if g == strconv.FormatUint(uint64(gid), 10) {
					return true
				}
			}
		}
	}
	return false
}
