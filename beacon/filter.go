package beacon

import "time"

// JobInfo is what the store knows of a job without reading its records.
type JobInfo struct {
	Job   string
	App   string
	Uid   uint32
	First int64 // first window, unix ns
	Last  int64 // last window
	Ops   uint64
	Bytes uint64
	// Profiled is the last window folded into the application's profile.
	Profiled int64
}

// Filter selects records. Zero fields match everything.
type Filter struct {
	Job    string
	Node   string
	Server string
	Layer  Layer
	Ino    uint64
	From   time.Time // windows starting at or after
	To     time.Time // windows starting before
}

// Match reports whether r passes the filter.
func (f *Filter) Match(r *Record) bool {
	return (f.Job == "" || r.Job == f.Job) && (f.Node == "" || r.Node == f.Node) &&
		(f.Server == "" || r.Server == f.Server) && (f.Layer == 0 || r.Layer == f.Layer) &&
		(f.Ino == 0 || r.Ino == f.Ino)
}

// Bounds returns the filter's window range in unix ns.
func (f *Filter) Bounds() (int64, int64) {
	lo, hi := int64(0), int64(1<<62)
	if !f.From.IsZero() {
		lo = f.From.UnixNano()
	}
	if !f.To.IsZero() {
		hi = f.To.UnixNano()
	}
	return lo, hi
}
