// Package tiering is ONFS's downward-migration policy (file coolness
// measurement and write control by free space; docs/tiering.md, ONFS §5–6),
// pure: the caller passes the time, one data server's state and the
// servers of the tiers below, and gets back what to do now: the server's
// mode (whether writes that need a new chunk must wait), how many
// migrations may run at once, and which files to move where.
//
// Free space on a mem or ssd server falls through three thresholds,
// Cs-w < Cf-m < Cn-m:
//
//	free > Cn-m          nothing moves
//	Cf-m < free ≤ Cn-m   normal out: closed files move down, coolest first
//	                     by Close·T_closed·(T_co/T_oc)
//	Cs-w < free ≤ Cf-m   forced out: open files too, from the head of the
//	                     LRU of open files, Open·LRU-open·(T_co/T_oc)
//	free ≤ Cs-w          writes that need a new chunk wait, while forced
//	                     out goes on
//
// Migrations run N at once, N = B(source write) / B(one destination
// write) (ONFS eq. 1), from the servers' own recent figures.
//
// It owns no state, sleeps never, reads no clock and does no I/O; the data
// and metadata daemons and the simulator call it and carry out its
// decisions.
package tiering

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Mode is what a server's free space calls for.
type Mode int

const (
	Calm        Mode = iota // free > Cn-m
	NormalOut               // Cf-m < free ≤ Cn-m: closed files move down
	ForcedOut               // Cs-w < free ≤ Cf-m: open files too
	StallWrites             // free ≤ Cs-w: writes needing a new chunk wait; forced out goes on
)

func (m Mode) String() string {
	switch m {
	case Calm:
		return "calm"
	case NormalOut:
		return "normal-out"
	case ForcedOut:
		return "forced-out"
	case StallWrites:
		return "stall-writes"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Thresholds are free-space levels of one server in bytes: StallWrite
// (Cs-w) < ForcedOut (Cf-m) < NormalOut (Cn-m).
type Thresholds struct {
	StallWrite, ForcedOut, NormalOut uint64
}

// Valid says whether the thresholds are ordered.
func (t Thresholds) Valid() error {
	if !(t.StallWrite < t.ForcedOut && t.ForcedOut < t.NormalOut) {
		return fmt.Errorf("tiering thresholds must satisfy Cs-w < Cf-m < Cn-m (got %d, %d, %d)", t.StallWrite, t.ForcedOut, t.NormalOut)
	}
	return nil
}

// DefaultThresholds derives a server's thresholds the way ONFS §6.4 does,
// from what N migrations at once free: Cs-w is one chunk (a write needing
// a new chunk cannot get one below it); ΔCf = Cf-m − Cs-w is N chunks and
// ΔCn = Cn-m − Cf-m is N average files, each at least 5 % and 10 % of the
// capacity so that a small N does not leave the server without headroom.
// The three stay below the capacity.
func DefaultThresholds(capacity, chunk uint64, n int, avgFile uint64) Thresholds {
	n = max(n, 1)
	sw := chunk
	df := max(uint64(n)*chunk, capacity/20)
	dn := max(uint64(n)*avgFile, capacity/10)
	t := Thresholds{StallWrite: sw, ForcedOut: sw + df, NormalOut: sw + df + dn}
	if capacity > 0 && t.NormalOut >= capacity {
		// a small server: keep the order within its capacity
		t = Thresholds{StallWrite: min(chunk, capacity/10), ForcedOut: capacity / 5, NormalOut: capacity / 2}
		if t.StallWrite >= t.ForcedOut {
			t.StallWrite = t.ForcedOut / 2
		}
	}
	return t
}

// ModeOf returns the mode a server with free bytes free is in.
func ModeOf(free uint64, t Thresholds) Mode {
	switch {
	case free <= t.StallWrite:
		return StallWrites
	case free <= t.ForcedOut:
		return ForcedOut
	case free <= t.NormalOut:
		return NormalOut
	}
	return Calm
}

// File is one file with data on the server, as observed.
type File struct {
	Ino   uint64
	Bytes uint64 // held on this server
	Open  bool   // open by some client now
	// LastClose is when it was last closed (closed files); LastAccess when
	// a read or write last touched it (open files' LRU order).
	LastClose, LastAccess time.Time
	// MeanTco is the mean time between a close and the next open, MeanToc
	// between an open and its close (0: not seen yet).
	MeanTco, MeanToc time.Duration
	Pinned           bool // its directory pins it to this tier
	Migrating        bool // a migration of it is under way
}

// Server is the data server whose space the policy manages.
type Server struct {
	ID       uint64
	Tier     string
	Capacity uint64
	Used     uint64
	// WriteBW is the server's recent aggregate write bandwidth (bytes/s;
	// 0: not measured).
	WriteBW float64
	// InFlight is how many migrations from it are running.
	InFlight int
	Files    []File
}

// Free returns the server's free bytes.
func (s Server) Free() uint64 {
	if s.Used >= s.Capacity {
		return 0
	}
	return s.Capacity - s.Used
}

// Target is a server of a lower tier a file may move to.
type Target struct {
	ID   uint64
	Tier string
	Rank uint32 // tier rank: lower is faster; only ranks below the source's are used
	// Free bytes (Unbounded: the PFS).
	Free      uint64
	Unbounded bool
	// StreamBW is what one migration stream writes to it (bytes/s; 0:
	// not measured).
	StreamBW float64
	Alive    bool
}

// Config tunes the policy; the zero value is ONFS's.
type Config struct {
	// Thresholds of the server (zero: DefaultThresholds from the
	// capacity, ChunkSize, N and the files' mean size).
	Thresholds Thresholds
	ChunkSize  uint64 // default 4 MiB
	// MaxConcurrent caps N (default 64); DefaultConcurrent is N when the
	// bandwidths are not measured yet (default 4).
	MaxConcurrent, DefaultConcurrent int
}

func (c Config) withDefaults() Config {
	if c.ChunkSize == 0 {
		c.ChunkSize = 4 << 20
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 64
	}
	if c.DefaultConcurrent <= 0 {
		c.DefaultConcurrent = 4
	}
	return c
}

// Move is one migration to start.
type Move struct {
	Ino      uint64
	Bytes    uint64
	To       uint64 // target server
	Tier     string
	Forced   bool    // an open file (forced out)
	Coolness float64 // the score it was chosen by
}

// Decision is what the server is to do now.
type Decision struct {
	Mode        Mode
	Thresholds  Thresholds
	Concurrency int // N: migrations that may run at once
	Moves       []Move
	// Reason says why the moves stop where they do (for logs and Beacon).
	Reason string
	// InFlight is the moves off the server under way when the decision
	// was made (Server.InFlight): see Stuck.
	InFlight int
}

// Stuck says whether writers waiting at Cs-w on a server wait in vain, so
// that placement should keep no reserve there (new chunks take its last
// bytes, then go on to a lower tier): it is short of space (not calm),
// the decision d found nothing to move off it, and nothing was moving off
// it when d was made nor is now (moving). A decision without moves made
// while moves were under way (N of them already, or every candidate among
// them) says nothing of what is left once they end: until the next look,
// writers keep waiting. Counting such a decision as stuck from the moment
// its moves ended let a chunk placed in that window spill to a lower tier
// (the CI's TestTieringWritesWait: one file of 24 on ssd). The daemons'
// manager and the simulator's models both ask here.
func Stuck(d Decision, moving int) bool {
	return d.Mode != Calm && len(d.Moves) == 0 && d.InFlight == 0 && moving == 0
}

// Concurrency is ONFS's N = B(source write) / B(one destination write),
// at least 1 and at most max; def when either figure is unknown.
func Concurrency(sourceWrite, streamWrite float64, def, maxN int) int {
	if sourceWrite <= 0 || streamWrite <= 0 {
		return min(def, maxN)
	}
	n := int(math.Round(sourceWrite / streamWrite))
	return min(max(n, 1), maxN)
}

// NormalCoolness is a closed file's coolness for normal out:
// Close·T_closed·(T_co/T_oc). An open file scores 0 (never chosen). A file
// never reopened (T_co unknown) counts as reopened after as long as it has
// been closed; one with T_oc unknown as open for a second.
func NormalCoolness(f File, now time.Time) float64 {
	if f.Open {
		return 0
	}
	closed := now.Sub(f.LastClose).Seconds()
	if closed <= 0 {
		closed = 1e-3
	}
	return closed * ratio(f, closed)
}

// ForcedCoolness is an open file's coolness for forced out given its
// position in the LRU of open files (lruRank 1 is the least recently used
// of n): Open·LRU-open·(T_co/T_oc), with LRU-open = (n − lruRank + 1) so
// the head of the queue scores highest.
func ForcedCoolness(f File, lruRank, n int) float64 {
	if !f.Open {
		return 0
	}
	return float64(n-lruRank+1) * ratio(f, 0)
}

// ratio is T_co/T_oc with the defaults above (closedFor stands in for an
// unknown T_co; 1 s for an unknown T_oc; both unknown: 1).
func ratio(f File, closedFor float64) float64 {
	tco, toc := f.MeanTco.Seconds(), f.MeanToc.Seconds()
	if tco <= 0 {
		tco = closedFor
	}
	if toc <= 0 {
		toc = 1
	}
	if tco <= 0 {
		return 1
	}
	return tco / toc
}

// Plan decides what server s does at time now, given the servers of the
// tiers below (rank below srcRank). It starts at most Concurrency minus the
// migrations in flight, coolest first, until the space they free (with
// what is already migrating) lifts the free space above Cn-m. Pinned files
// and files already migrating are never chosen. A file goes to the fastest
// lower tier with room, on the live server there with the most free space.
func Plan(now time.Time, cfg Config, s Server, srcRank uint32, targets []Target) Decision {
	cfg = cfg.withDefaults()
	var bw float64
	for _, t := range targets {
		if t.Alive && t.Rank > srcRank && t.StreamBW > 0 && (bw == 0 || t.StreamBW < bw) {
			bw = t.StreamBW // the slowest stream bounds how many are useful
		}
	}
	d := Decision{Concurrency: Concurrency(s.WriteBW, bw, cfg.DefaultConcurrent, cfg.MaxConcurrent), InFlight: s.InFlight}
	d.Thresholds = cfg.Thresholds
	if d.Thresholds == (Thresholds{}) {
		d.Thresholds = DefaultThresholds(s.Capacity, cfg.ChunkSize, d.Concurrency, meanSize(s.Files))
	}
	free := s.Free()
	d.Mode = ModeOf(free, d.Thresholds)
	if d.Mode == Calm {
		d.Reason = "free space above Cn-m"
		return d
	}
	// what is already leaving counts as freed
	pending := free
	for _, f := range s.Files {
		if f.Migrating {
			pending += f.Bytes
		}
	}
	slots := d.Concurrency - s.InFlight
	if slots <= 0 {
		d.Reason = fmt.Sprintf("%d migrations in flight (N = %d)", s.InFlight, d.Concurrency)
		return d
	}
	cands := candidates(now, s.Files, d.Mode)
	room := append([]Target(nil), targets...)
	d.Reason = "no file left to move"
	for _, c := range cands {
		if pending > d.Thresholds.NormalOut {
			d.Reason = "planned moves lift free space above Cn-m"
			break
		}
		if len(d.Moves) == slots {
			d.Reason = fmt.Sprintf("N = %d migrations at once", d.Concurrency)
			break
		}
		t := pick(room, srcRank, c.f.Bytes)
		if t == nil {
			d.Reason = "no lower tier has room"
			break
		}
		if !t.Unbounded {
			t.Free -= c.f.Bytes
		}
		d.Moves = append(d.Moves, Move{Ino: c.f.Ino, Bytes: c.f.Bytes, To: t.ID, Tier: t.Tier, Forced: c.f.Open, Coolness: c.score})
		pending += c.f.Bytes
	}
	return d
}

type candidate struct {
	f     File
	score float64
}

// candidates returns the files mode allows to move, coolest first: closed
// files by normal coolness; in forced out, then the open files by forced
// coolness (a closed file is always cooler than an open one).
func candidates(now time.Time, files []File, mode Mode) []candidate {
	var closed, open []candidate
	var opened []File
	for _, f := range files {
		if f.Pinned || f.Migrating || f.Bytes == 0 {
			continue
		}
		if f.Open {
			opened = append(opened, f)
			continue
		}
		closed = append(closed, candidate{f, NormalCoolness(f, now)})
	}
	sortCool(closed)
	if mode < ForcedOut {
		return closed
	}
	// the LRU of open files: least recently accessed at the head
	sort.SliceStable(opened, func(i, j int) bool {
		if !opened[i].LastAccess.Equal(opened[j].LastAccess) {
			return opened[i].LastAccess.Before(opened[j].LastAccess)
		}
		return opened[i].Ino < opened[j].Ino
	})
	for i, f := range opened {
		open = append(open, candidate{f, ForcedCoolness(f, i+1, len(opened))})
	}
	sortCool(open)
	return append(closed, open...)
}

func sortCool(c []candidate) {
	sort.SliceStable(c, func(i, j int) bool {
		if c[i].score != c[j].score {
			return c[i].score > c[j].score
		}
		return c[i].f.Ino < c[j].f.Ino
	})
}

// pick returns the target for bytes: on the fastest tier below srcRank
// where a live server has room, the one with the most free space.
func pick(room []Target, srcRank uint32, bytes uint64) *Target {
	var best *Target
	for i := range room {
		t := &room[i]
		if !t.Alive || t.Rank <= srcRank || !t.Unbounded && t.Free < bytes {
			continue
		}
		switch {
		case best == nil, t.Rank < best.Rank:
			best = t
		case t.Rank == best.Rank && !best.Unbounded && (t.Unbounded || t.Free > best.Free):
			best = t
		}
	}
	return best
}

func meanSize(files []File) uint64 {
	var sum, n uint64
	for _, f := range files {
		if f.Bytes > 0 {
			sum += f.Bytes
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}
