package vfs

import (
	"sync"
	"sync/atomic"
)

// Appends places the writes of handles opened with O_APPEND at the end of
// the file as this mount knows it, not where the kernel asks.
//
// With direct I/O (and without a writeback cache) the kernel sends an
// append's write at the size it has cached for the file. Another node's
// write that grew the file reaches that cache only through the change feed,
// a little after the other node's close; an open in between would append
// over the other node's last bytes. The service's answer to the open
// carries the file's size as of the open (close-to-open), so a write of an
// append handle goes at the largest of: the kernel's offset, the size the
// service gave at open, and the end of every write this mount made to the
// file since (any handle; the kernel serialises appends to an inode).
// A truncate through this mount sets that end. What another node does
// after the open is not seen, as with NFS: appends from several nodes at
// once are not atomic.
//
// Only inodes with an append handle open are kept; with none open, a
// write takes no lock here.
type Appends struct {
	open    atomic.Int64 // append handles open (len(handles), read without mu)
	mu      sync.Mutex
	handles map[uint64]uint64       // append handle → inode; guarded by mu
	inodes  map[uint64]*appendInode // guarded by mu
}

type appendInode struct {
	end     uint64 // where the next append goes, at least
	handles int    // append handles open on it
}

// NewAppends returns an empty Appends.
func NewAppends() *Appends {
	return &Appends{handles: map[uint64]uint64{}, inodes: map[uint64]*appendInode{}}
}

// Opened records handle fh opened ino with O_APPEND while the file was
// size bytes long.
func (a *Appends) Opened(ino, fh, size uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.handles[fh]; ok {
		return
	}
	a.handles[fh] = ino
	a.open.Add(1)
	in := a.inodes[ino]
	if in == nil {
		in = &appendInode{}
		a.inodes[ino] = in
	}
	in.handles++
	in.end = max(in.end, size)
}

// Place returns where a write of handle fh to ino that the kernel sent at
// off goes: off, unless fh appends and the file's end lies past it.
func (a *Appends) Place(ino, fh, off uint64) uint64 {
	if a.open.Load() == 0 {
		return off
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.handles[fh]; !ok {
		return off
	}
	if in := a.inodes[ino]; in != nil {
		return max(off, in.end)
	}
	return off
}

// Wrote records a write of this mount to ino that reached end.
func (a *Appends) Wrote(ino, end uint64) {
	if a.open.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if in := a.inodes[ino]; in != nil {
		in.end = max(in.end, end)
	}
}

// Truncated records that this mount set ino's size.
func (a *Appends) Truncated(ino, size uint64) {
	if a.open.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if in := a.inodes[ino]; in != nil {
		in.end = size
	}
}

// Released forgets handle fh.
func (a *Appends) Released(fh uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ino, ok := a.handles[fh]
	if !ok {
		return
	}
	delete(a.handles, fh)
	a.open.Add(-1)
	if in := a.inodes[ino]; in != nil {
		if in.handles--; in.handles == 0 {
			delete(a.inodes, ino)
		}
	}
}

// kept returns the inodes kept (tests).
func (a *Appends) kept() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.inodes)
}
