package beacon

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Interference is one job slowed down on a server while another job used
// it: Victim's mean response time there (queue wait plus service) in the
// windows both were active, divided by the same in the windows it ran
// there alone.
type Interference struct {
	Server    string
	Victim    string
	Aggressor string
	Inflation float64
	Shared    int           // windows both were active
	Alone     int           // windows the victim was alone
	LatShared time.Duration // victim's mean latency when shared
	LatAlone  time.Duration
}

// InterferenceOptions tune the detector. Zero fields take the defaults.
type InterferenceOptions struct {
	MinInflation float64 // report pairs at or above (1.5)
	MinWindows   int     // shared and alone windows needed (1)
	MinOps       uint64  // victim operations per window to count it (4)
}

// OpStat is a count of operations and their summed latency (ns) in one
// window and class: the cell the interference and fail-slow detectors
// compare.
type OpStat struct {
	Ops    uint64
	LatSum int64
}

// DetectInterference finds job pairs that slowed each other down on the
// forwarding nodes and data servers, from fwd and data layer records. Like
// is compared with like: a victim's response times are compared per
// operation and request size class, and the classes it had both alone and
// shared are averaged, weighted by its operations when shared. Pairs are
// ordered by inflation, highest first.
func DetectInterference(recs []Record, opt InterferenceOptions) []Interference {
	if opt.MinInflation == 0 {
		opt.MinInflation = 1.5
	}
	if opt.MinWindows == 0 {
		opt.MinWindows = 1
	}
	if opt.MinOps == 0 {
		opt.MinOps = 4
	}
	var out []Interference
	for server, ws := range opStatsByServer(recs) {
		alone, shared := aloneShared(ws, opt.MinOps)
		for p, su := range pairSums(alone, shared) {
			if len(su.shared) < opt.MinWindows || len(su.aloneWins) < opt.MinWindows {
				continue
			}
			f := su.weighted / su.ops
			if f >= opt.MinInflation {
				out = append(out, Interference{Server: server, Victim: p.v, Aggressor: p.g, Inflation: f,
					Shared: len(su.shared), Alone: len(su.aloneWins),
					LatShared: time.Duration(su.ls / su.ops), LatAlone: time.Duration(su.la / su.ops)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Inflation > out[j].Inflation })
	return out
}

// opClass is an operation and its size class.
type opClass struct {
	op   string
	size uint64
}

// windowStats is, per window, per job, per operation class, what the
// servers' records of the jobs' data and metadata operations sum to.
type windowStats = map[int64]map[string]map[opClass]*OpStat

// opStatsByServer sums the servers' records by server, window, job and
// operation class: the latency each job felt (queueing and service).
func opStatsByServer(recs []Record) map[string]windowStats {
	per := map[string]windowStats{}
	for i := range recs {
		r := &recs[i]
		if r.Layer == LayerClient || r.Job == "" || !r.IsData() && !r.IsMeta() {
			continue
		}
		ws := per[r.Server]
		if ws == nil {
			ws = windowStats{}
			per[r.Server] = ws
		}
		js := ws[r.Window]
		if js == nil {
			js = map[string]map[opClass]*OpStat{}
			ws[r.Window] = js
		}
		cs := js[r.Job]
		if cs == nil {
			cs = map[opClass]*OpStat{}
			js[r.Job] = cs
		}
		c := opClass{r.Op, SizeClass(r.Size)}
		st := cs[c]
		if st == nil {
			st = &OpStat{}
			cs[c] = st
		}
		st.Ops += r.Count
		st.LatSum += r.LatSum + r.Wait // what the job felt: queueing and service
	}
	return per
}

// latAcc sums operations and latencies over the windows it saw.
type latAcc struct {
	OpStat
	windows map[int64]bool
}

func (a *latAcc) add(st *OpStat, w int64) {
	a.Ops += st.Ops
	a.LatSum += st.LatSum
	a.windows[w] = true
}

func accOf(m map[string]*latAcc, k string) *latAcc {
	a := m[k]
	if a == nil {
		a = &latAcc{windows: map[int64]bool{}}
		m[k] = a
	}
	return a
}

// aloneShared sums one server's windows (of at least minOps operations of
// a class) by victim and class where the job ran alone (alone:
// victim|op|size), and by victim, aggressor and class where it shared the
// server (shared: victim|aggressor|op|size).
func aloneShared(ws windowStats, minOps uint64) (alone, shared map[string]*latAcc) {
	alone, shared = map[string]*latAcc{}, map[string]*latAcc{}
	for w, js := range ws {
		for v, cs := range js {
			for c, st := range cs {
				if st.Ops < minOps {
					continue
				}
				ck := fmt.Sprintf("%s|%d", c.op, c.size)
				if len(js) == 1 {
					accOf(alone, v+"\x00"+ck).add(st, w)
					continue
				}
				for g := range js {
					if g != v {
						accOf(shared, v+"\x00"+g+"\x00"+ck).add(st, w)
					}
				}
			}
		}
	}
	return alone, shared
}

// jobPair is a victim and an aggressor.
type jobPair struct{ v, g string }

// pairSum is a pair's latencies shared and alone, weighted by the
// victim's operations shared, and the windows of each.
type pairSum struct {
	weighted, ops     float64
	ls, la            float64
	shared, aloneWins map[int64]bool
}

// pairSums compares each victim's latency shared with each aggressor with
// its latency alone, class by class.
func pairSums(alone, shared map[string]*latAcc) map[jobPair]*pairSum {
	pairs := map[jobPair]*pairSum{}
	for k, sh := range shared {
		parts := strings.SplitN(k, "\x00", 3)
		al := alone[parts[0]+"\x00"+parts[2]]
		if al == nil || al.Ops == 0 || sh.Ops == 0 {
			continue
		}
		la := float64(al.LatSum) / float64(al.Ops)
		ls := float64(sh.LatSum) / float64(sh.Ops)
		if la <= 0 {
			continue
		}
		p := jobPair{parts[0], parts[1]}
		su := pairs[p]
		if su == nil {
			su = &pairSum{shared: map[int64]bool{}, aloneWins: map[int64]bool{}}
			pairs[p] = su
		}
		n := float64(sh.Ops)
		su.weighted += n * ls / la
		su.ops += n
		su.ls += n * ls
		su.la += n * la
		for w := range sh.windows {
			su.shared[w] = true
		}
		for w := range al.windows {
			su.aloneWins[w] = true
		}
	}
	return pairs
}

// SlowServer is a server whose service latency stayed well above its
// peers' under comparable load.
type SlowServer struct {
	Server  string
	Layer   Layer
	Ratio   float64 // its latency over the peers' median, median over windows
	Windows int     // windows in which it was slow
	Since   int64   // first slow window, unix ns
}

// Median of v (0 for none); v is sorted in place.
func Median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
