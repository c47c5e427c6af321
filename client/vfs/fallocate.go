package vfs

import "syscall"

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
