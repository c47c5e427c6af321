// Package locktable is the table of file locks the metadata service
// grants across mounts, and each mount's copy of the locks it was granted:
// POSIX record locks (byte ranges, split and merged per owner, as Linux's
// posix_lock_inode does; OFD locks are the same kind, owned by an open
// file description) and flock locks (whole file, one per owner), which do
// not conflict with each other. It is pure: no clock, no I/O, no waiting;
// the caller serialises calls (the service's lock mutex, the mount's).
// It must not know how a lock request travels or how a waiter waits.
package locktable

import (
	"cmp"
	"slices"
)

// Kind is a lock's family: locks conflict only within one kind.
type Kind uint8

const (
	Posix Kind = iota // fcntl F_SETLK, lockf and OFD locks: byte ranges
	Flock             // flock(2): the whole file
)

// Type is a lock's mode.
type Type uint8

const (
	Read  Type = iota // shared (F_RDLCK, LOCK_SH)
	Write             // exclusive (F_WRLCK, LOCK_EX)
)

// MaxEnd is the end of a lock "to the end of the file" (the kernel's
// OFFSET_MAX); ends are inclusive.
const MaxEnd = 1<<63 - 1

// Owner is who holds a lock: a mount (Client, its id at the metadata
// service) and the kernel's lock owner there (a process's file table for
// POSIX locks, an open file description for OFD and flock locks).
type Owner struct {
	Client, ID uint64
}

// Lock is one held lock of a file.
type Lock struct {
	Owner
	Kind       Kind
	Type       Type
	Start, End uint64 // inclusive byte range (flock: 0, MaxEnd)
	Pid        uint32 // the process that took it (for F_GETLK)
}

// overlaps reports whether l and m cover a common byte.
func (l Lock) overlaps(m Lock) bool { return l.Start <= m.End && m.Start <= l.End }

// conflicts reports whether l and m, of different owners, cannot be held
// together.
func (l Lock) conflicts(m Lock) bool {
	return l.Kind == m.Kind && l.Owner != m.Owner && (l.Type == Write || m.Type == Write) && l.overlaps(m)
}

// Table is the locks held on each file. The zero Table is empty and ready.
type Table struct {
	files map[uint64][]Lock // inode → its locks, in no order
}

// Conflict returns a lock of another owner that keeps l from being
// granted on ino, if there is one.
func (t *Table) Conflict(ino uint64, l Lock) (Lock, bool) {
	for _, m := range t.files[ino] {
		if m.conflicts(l) {
			return m, true
		}
	}
	return Lock{}, false
}

// Blockers returns the owners of the locks that keep l from being granted
// on ino, each once.
func (t *Table) Blockers(ino uint64, l Lock) []Owner {
	var os []Owner
	for _, m := range t.files[ino] {
		if m.conflicts(l) && !slices.Contains(os, m.Owner) {
			os = append(os, m.Owner)
		}
	}
	return os
}

// Set grants l on ino: the caller checked that nothing conflicts. A POSIX
// lock replaces its owner's locks over its range (an upgrade or
// downgrade splits them) and merges with its owner's locks of the same
// type that overlap or touch it; a flock lock replaces its owner's.
func (t *Table) Set(ino uint64, l Lock) {
	if l.Kind == Flock {
		l.Start, l.End = 0, MaxEnd
	}
	ls := t.cut(ino, l.Owner, l.Kind, l.Start, l.End)
	if l.Kind == Posix {
		// merge with the owner's neighbours of the same type
		ls = slices.DeleteFunc(ls, func(m Lock) bool {
			if m.Owner != l.Owner || m.Kind != Posix || m.Type != l.Type {
				return false
			}
			touches := m.End != MaxEnd && m.End+1 == l.Start || l.End != MaxEnd && l.End+1 == m.Start
			if !touches && !m.overlaps(l) {
				return false
			}
			l.Start, l.End = min(l.Start, m.Start), max(l.End, m.End)
			return true
		})
	}
	t.put(ino, append(ls, l))
}

// Unlock removes owner's locks of kind over [start, end] on ino (split
// where the range cuts one); it reports whether it removed anything.
func (t *Table) Unlock(ino uint64, kind Kind, owner Owner, start, end uint64) bool {
	if kind == Flock {
		start, end = 0, MaxEnd
	}
	if !slices.ContainsFunc(t.files[ino], func(m Lock) bool {
		return m.Owner == owner && m.Kind == kind && m.Start <= end && start <= m.End
	}) {
		return false
	}
	t.put(ino, t.cut(ino, owner, kind, start, end))
	return true
}

// cut returns ino's locks with owner's locks of kind cut out of
// [start, end] (a lock across the range is split in two).
func (t *Table) cut(ino uint64, owner Owner, kind Kind, start, end uint64) []Lock {
	old := t.files[ino]
	ls := make([]Lock, 0, len(old)+1)
	for _, m := range old {
		if m.Owner != owner || m.Kind != kind || m.End < start || end < m.Start {
			ls = append(ls, m)
			continue
		}
		if m.Start < start {
			left := m
			left.End = start - 1
			ls = append(ls, left)
		}
		if end < m.End {
			right := m
			right.Start = end + 1
			ls = append(ls, right)
		}
	}
	return ls
}

// put stores ls as ino's locks.
func (t *Table) put(ino uint64, ls []Lock) {
	if len(ls) == 0 {
		delete(t.files, ino)
		return
	}
	if t.files == nil {
		t.files = map[uint64][]Lock{}
	}
	t.files[ino] = ls
}

// Holds reports whether owner holds a lock of kind on ino.
func (t *Table) Holds(ino uint64, kind Kind, owner Owner) bool {
	for _, m := range t.files[ino] {
		if m.Owner == owner && m.Kind == kind {
			return true
		}
	}
	return false
}

// DropClient removes every lock of mount client; it returns the inodes
// that had any, in no order.
func (t *Table) DropClient(client uint64) []uint64 {
	var inos []uint64
	for ino, ls := range t.files {
		kept := slices.DeleteFunc(slices.Clone(ls), func(m Lock) bool { return m.Client == client })
		if len(kept) != len(ls) {
			inos = append(inos, ino)
			t.put(ino, kept)
		}
	}
	return inos
}

// Held is one lock with its file, as a mount reclaims it.
type Held struct {
	Ino uint64
	Lock
}

// Of returns the locks of mount client (all clients: 0 is no mount's id
// and means every lock), ordered by file, kind, owner and start.
func (t *Table) Of(client uint64) []Held {
	var hs []Held
	for ino, ls := range t.files {
		for _, m := range ls {
			if client == 0 || m.Client == client {
				hs = append(hs, Held{ino, m})
			}
		}
	}
	slices.SortFunc(hs, func(a, b Held) int {
		return cmp.Or(cmp.Compare(a.Ino, b.Ino), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Client, b.Client),
			cmp.Compare(a.ID, b.ID), cmp.Compare(a.Start, b.Start))
	})
	return hs
}

// Len returns how many locks the table holds.
func (t *Table) Len() int {
	n := 0
	for _, ls := range t.files {
		n += len(ls)
	}
	return n
}
