package meta

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// File activity: the open/close history of each file since the service
// started, the input of file coolness (policy/tiering; ONFS §6.3, where
// the MDS computes T_co and T_oc the same way). A file's record changes
// when it goes from closed to open (the first handle) and from open to
// closed (the last release). It is soft state, as in ONFS, where a file's
// history is cleared when it leaves a tier: a restart starts it over, and
// past activityMax files the records of closed files are dropped, some at
// a time.

// activityMax bounds the files with a record.
const activityMax = 1 << 20

// activity is one file's record. Guarded by Service.mu.
type activity struct {
	opened              uint64
	lastOpen, lastClose int64 // unix ns; 0: never
	lastAccess          int64 // unix ns, as forwarding daemons report it (Accessed); 0: none
	sumTco, sumToc      time.Duration
	nTco, nToc          uint64
}

// openedLocked notes that ino went from closed to open at t.
func (s *Service) openedLocked(ino uint64, t time.Time) {
	a := s.activity[ino]
	if a == nil {
		if len(s.activity) >= activityMax {
			s.trimActivityLocked()
		}
		a = &activity{}
		s.activity[ino] = a
	}
	now := t.UnixNano()
	if a.lastClose != 0 && now >= a.lastClose {
		a.sumTco += time.Duration(now - a.lastClose)
		a.nTco++
	}
	a.opened++
	a.lastOpen = now
}

// closedLocked notes that the last handle of ino was released at t.
func (s *Service) closedLocked(ino uint64, t time.Time) {
	a := s.activity[ino]
	if a == nil {
		return // opened before the service started
	}
	now := t.UnixNano()
	if a.lastOpen != 0 && now >= a.lastOpen {
		a.sumToc += time.Duration(now - a.lastOpen)
		a.nToc++
	}
	a.lastClose = now
}

// Accessed notes the reads and writes a forwarding daemon reports: each
// file was last accessed its Ago before at (ns.Access). Files without a
// record (opened before the service started) get one.
func (s *Service) Accessed(at int64, files []ns.FileAccess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range files {
		t := at - int64(e.Ago)
		a := s.activity[e.Ino]
		if a == nil {
			if _, err := s.getInode(e.Ino); err != nil {
				continue
			}
			if len(s.activity) >= activityMax {
				s.trimActivityLocked()
			}
			a = &activity{}
			s.activity[e.Ino] = a
		}
		a.lastAccess = max(a.lastAccess, t)
	}
}

// trimActivityLocked drops a tenth of the records of closed files.
func (s *Service) trimActivityLocked() {
	drop := activityMax / 10
	for ino := range s.activity {
		if drop == 0 {
			return
		}
		if s.opens.total[ino] == 0 {
			delete(s.activity, ino)
			drop--
		}
	}
}

// Activity returns ino's open/close history.
func (s *Service) Activity(ino uint64) (wire.Activity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.getInode(ino); err != nil {
		return wire.Activity{}, err
	}
	out := wire.Activity{Open: s.opens.total[ino]}
	if a := s.activity[ino]; a != nil {
		out.Opened, out.LastOpen, out.LastClose, out.LastAccess = a.opened, a.lastOpen, a.lastClose, a.lastAccess
		if a.nTco > 0 {
			out.MeanTco = a.sumTco / time.Duration(a.nTco)
		}
		if a.nToc > 0 {
			out.MeanToc = a.sumToc / time.Duration(a.nToc)
		}
	}
	return out, nil
}
