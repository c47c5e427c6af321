package beacon

import (
	"math/bits"
	"sort"
	"strings"
	"time"
)

// I/O modes (which ranks touch which files).
const (
	ModeNone = "none"
	ModeNN   = "N-N" // every I/O rank has files of its own
	Mode1    = "1-1" // one rank does all the I/O
	ModeN1   = "N-1" // all I/O ranks share one file
	ModeNM   = "N-M" // groups of ranks share files
)

// Behaviours (what a job does to the storage system); a job may show
// several.
const (
	ClassBandwidth  = "bandwidth" // large requests, much data
	ClassIOPS       = "iops"      // many small data requests
	ClassMetadata   = "metadata"  // create/stat/remove storms
	ClassCheckpoint = "checkpoint"
)

// Thresholds decide the behaviours. Zero fields take the defaults.
type Thresholds struct {
	SmallRequest   uint64  // data requests at or below are small (64 KiB)
	LargeRequest   uint64  // mean request at or above is large (256 KiB)
	BandwidthBytes uint64  // at least this much data for "bandwidth" (64 MiB)
	IOPSOps        uint64  // at least this many small requests for "iops" (2000)
	MetaOps        uint64  // at least this many metadata operations (2000)
	MetaShare      float64 // ... making at least this share of all operations (0.5)
	// A checkpointing job writes in at least CkptBursts bursts separated by
	// idle windows, most of its bytes written (3).
	CkptBursts int
}

func (t Thresholds) withDefaults() Thresholds {
	if t.SmallRequest == 0 {
		t.SmallRequest = 64 << 10
	}
	if t.LargeRequest == 0 {
		t.LargeRequest = 256 << 10
	}
	if t.BandwidthBytes == 0 {
		t.BandwidthBytes = 64 << 20
	}
	if t.IOPSOps == 0 {
		t.IOPSOps = 2000
	}
	if t.MetaOps == 0 {
		t.MetaOps = 2000
	}
	if t.MetaShare == 0 {
		t.MetaShare = 0.5
	}
	if t.CkptBursts == 0 {
		t.CkptBursts = 3
	}
	return t
}

// Point is one window of a job's timeline.
type Point struct {
	Window     int64 // unix ns
	ReadBytes  uint64
	WriteBytes uint64
	DataOps    uint64
	MetaOps    uint64
}

// SizeBin counts requests up to Size bytes (and above the previous bin).
type SizeBin struct {
	Size uint64
	Ops  uint64
}

// RankTime is one rank's I/O.
type RankTime struct {
	Rank  int32
	Bytes uint64
	Time  time.Duration // summed service latency of its data operations
}

// ServerUse is the traffic a job sent through one server.
type ServerUse struct {
	Server string
	Layer  Layer
	Ops    uint64
	Bytes  uint64
	// Waited is the time the job's requests spent queued there before
	// service (including writes waiting for a tier to free space).
	Waited time.Duration
}

// JobReport is the analysis of one job's records.
type JobReport struct {
	Job     string
	App     string
	Uid     uint32
	From    time.Time // first window
	To      time.Time // end of the last window
	Source  Layer     // layer the per-job figures come from
	Ranks   int       // ranks seen
	Nodes   int       // compute nodes seen
	IORanks int       // ranks that read or wrote data
	IONodes int
	Files   int // files read or written
	Mode    string
	Classes []string

	ReadBytes, WriteBytes      uint64
	ReadOps, WriteOps, MetaOps uint64
	SeqShare                   float64 // data operations that were sequential
	MeanRequest                uint64
	Active                     time.Duration // busy time: in each window, first operation start to last end
	BW, PeakBW                 float64       // bytes/s over active windows, best window
	IOPS                       float64       // data operations/s over active windows
	MetaRate                   float64       // metadata operations/s over active windows
	Timeline                   []Point
	Sizes                      []SizeBin
	PerRank                    []RankTime // by rank
	// Slowest/median rank I/O time; 1 means balanced.
	Imbalance float64
	Servers   []ServerUse
	Bursts    int // separated runs of write windows
	// BurstBytes is the mean of what a burst wrote, BurstEvery the mean
	// time from one burst's start to the next's (0 with fewer than two):
	// a checkpointing job's checkpoint size and period.
	BurstBytes uint64
	BurstEvery time.Duration
	// Queued is the time the job's requests waited in the forwarding and
	// data servers' queues, summed over requests: pipeline queues, caps,
	// and writes stalled at a tier's write-stall threshold.
	Queued time.Duration
	// QoSWaited is the part of Queued the requests spent at QoS gates,
	// held by the rules' shares and caps (docs/qos.md).
	QoSWaited time.Duration
	// Inputs are the files (inodes) the job read and did not write, in the
	// order it first read them (at most MaxInputs): what pre-migration
	// promotes when the application runs again.
	Inputs []uint64
	// ReadTiers is the bytes the job's reads got from each tier's data
	// servers (mem, ssd, hdd, pfs), from the data layer's records: how many
	// of its reads hit the mem tier.
	ReadTiers map[string]uint64 `json:",omitempty"`
}

// MaxInputs bounds JobReport.Inputs.
const MaxInputs = 4096

// Analyze builds the report of one job from its records (any layers). The
// per-job figures come from the client layer when it was recorded, else
// from the forwarding layer.
func Analyze(job string, recs []Record, window time.Duration, th Thresholds) JobReport {
	th = th.withDefaults()
	if window <= 0 {
		window = DefaultWindow
	}
	rep := JobReport{Job: job, Mode: ModeNone}
	src := LayerFwd
	for i := range recs {
		if recs[i].Job == job && recs[i].Layer == LayerClient {
			src = LayerClient
			break
		}
	}
	rep.Source = src
	a := newAnalyzer(&rep, window)
	for i := range recs {
		r := &recs[i]
		if r.Job != job {
			continue
		}
		if r.Layer != LayerClient {
			a.server(r)
		}
		if r.Layer == src {
			a.add(r)
		}
	}
	if a.last == 0 {
		return rep
	}
	a.inputs()
	rep.From = time.Unix(0, a.first)
	rep.To = time.Unix(0, a.last).Add(window)
	rep.Ranks, rep.Nodes, rep.IORanks, rep.IONodes, rep.Files = len(a.ranks), len(a.nodes), len(a.ioRanks), len(a.ioNodes), len(a.files)
	a.rates()
	a.summary()
	shares := make([]FileShare, 0, len(a.files))
	for _, f := range a.files {
		shares = append(shares, FileShare{Bytes: f.bytes, Ranks: len(f.ranks)})
	}
	rep.Mode = ioMode(len(a.ioRanks), shares, rep.ReadBytes+rep.WriteBytes)
	rep.Classes = classify(&rep, a.dataOps, th)
	return rep
}

// analyzer sums one job's records into its report (Analyze).
type analyzer struct {
	rep            *JobReport
	window         time.Duration
	ranks, ioRanks map[int32]bool
	nodes, ioNodes map[string]bool
	files          map[uint64]*fileUse
	firstRead      map[uint64]int64 // ino → the job's first read of it
	written        map[uint64]bool
	perRank        map[int32]*RankTime
	timeline       map[int64]*Point
	busy           map[int64][2]int64 // per window: first start, last end
	sizes          map[uint64]uint64
	servers        map[string]*ServerUse
	seq, dataOps   uint64
	first, last    int64
}

// fileUse is the bytes a job moved to and from a file and the ranks that
// did.
type fileUse struct {
	bytes uint64
	ranks map[int32]bool
}

func newAnalyzer(rep *JobReport, window time.Duration) *analyzer {
	return &analyzer{rep: rep, window: window, ranks: map[int32]bool{}, nodes: map[string]bool{},
		ioRanks: map[int32]bool{}, ioNodes: map[string]bool{}, files: map[uint64]*fileUse{}, firstRead: map[uint64]int64{},
		written: map[uint64]bool{}, perRank: map[int32]*RankTime{}, timeline: map[int64]*Point{}, busy: map[int64][2]int64{},
		sizes: map[uint64]uint64{}, servers: map[string]*ServerUse{}, first: 1 << 62}
}

// server adds a daemon's record: the servers the job used are every
// daemon that recorded it.
func (a *analyzer) server(r *Record) {
	rep := a.rep
	su := a.servers[r.Server]
	if su == nil {
		su = &ServerUse{Server: r.Server, Layer: r.Layer}
		a.servers[r.Server] = su
	}
	su.Ops += r.Count
	su.Bytes += r.Bytes
	su.Waited += time.Duration(r.Wait)
	rep.Queued += time.Duration(r.Wait)
	rep.QoSWaited += time.Duration(r.QoSWait)
	if r.Layer == LayerData && r.Op == OpRead {
		// data servers record as data-<tier>-<id>
		if f := strings.Split(r.Server, "-"); len(f) == 3 {
			if rep.ReadTiers == nil {
				rep.ReadTiers = map[string]uint64{}
			}
			rep.ReadTiers[f[1]] += r.Bytes
		}
	}
}

// add adds a record of the layer the report is made from.
func (a *analyzer) add(r *Record) {
	rep := a.rep
	if r.App != "" && rep.App == "" {
		rep.App, rep.Uid = r.App, r.Uid
	}
	a.first = min(a.first, r.Window)
	a.last = max(a.last, r.Window)
	a.ranks[r.Rank] = true
	a.nodes[r.Node] = true
	p := a.timeline[r.Window]
	if p == nil {
		p = &Point{Window: r.Window}
		a.timeline[r.Window] = p
		a.busy[r.Window] = [2]int64{r.First, r.Last}
	} else {
		b := a.busy[r.Window]
		a.busy[r.Window] = [2]int64{min(b[0], r.First), max(b[1], r.Last)}
	}
	switch {
	case r.IsData():
		a.addData(r, p)
	case r.IsMeta():
		rep.MetaOps += r.Count
		p.MetaOps += r.Count
	}
}

// addData adds a data record (read or write) of window p.
func (a *analyzer) addData(r *Record, p *Point) {
	rep := a.rep
	a.ioRanks[r.Rank] = true
	a.ioNodes[r.Node] = true
	a.dataOps += r.Count
	a.seq += r.Seq
	p.DataOps += r.Count
	if r.Op == OpRead {
		rep.ReadOps += r.Count
		rep.ReadBytes += r.Bytes
		p.ReadBytes += r.Bytes
		if t, ok := a.firstRead[r.Ino]; !ok || r.First < t {
			a.firstRead[r.Ino] = r.First
		}
	} else {
		a.written[r.Ino] = true
		rep.WriteOps += r.Count
		rep.WriteBytes += r.Bytes
		p.WriteBytes += r.Bytes
	}
	f := a.files[r.Ino]
	if f == nil {
		f = &fileUse{ranks: map[int32]bool{}}
		a.files[r.Ino] = f
	}
	f.bytes += r.Bytes
	f.ranks[r.Rank] = true
	rt := a.perRank[r.Rank]
	if rt == nil {
		rt = &RankTime{Rank: r.Rank}
		a.perRank[r.Rank] = rt
	}
	rt.Bytes += r.Bytes
	rt.Time += time.Duration(r.LatSum)
	a.sizes[SizeClass(r.Size)] += r.Count
}

// inputs lists the files the job read and did not write, in the order it
// first read them, at most MaxInputs.
func (a *analyzer) inputs() {
	rep := a.rep
	for ino := range a.firstRead {
		if !a.written[ino] {
			rep.Inputs = append(rep.Inputs, ino)
		}
	}
	sort.Slice(rep.Inputs, func(i, j int) bool {
		x, y := rep.Inputs[i], rep.Inputs[j]
		if a.firstRead[x] != a.firstRead[y] {
			return a.firstRead[x] < a.firstRead[y]
		}
		return x < y
	})
	if len(rep.Inputs) > MaxInputs {
		rep.Inputs = rep.Inputs[:MaxInputs]
	}
}

// span is window w's busy time: from its first operation's start to its
// last one's end (within the window), so that a job that ran for part of
// a window is not measured as if it had idled the rest.
func (a *analyzer) span(w int64) time.Duration {
	b := a.busy[w]
	lo, hi := max(b[0], w), min(b[1], w+int64(a.window))
	if b[0] == 0 || b[1] == 0 || hi <= lo {
		return a.window
	}
	return time.Duration(hi - lo)
}

// rates makes the timeline, the rates over active windows and the bursts
// of writes.
func (a *analyzer) rates() {
	rep, window := a.rep, a.window
	for _, p := range a.timeline {
		rep.Timeline = append(rep.Timeline, *p)
	}
	sort.Slice(rep.Timeline, func(i, j int) bool { return rep.Timeline[i].Window < rep.Timeline[j].Window })
	for _, p := range rep.Timeline {
		rep.Active += a.span(p.Window)
	}
	secs := rep.Active.Seconds()
	total := rep.ReadBytes + rep.WriteBytes
	if secs > 0 {
		rep.BW = float64(total) / secs
		rep.IOPS = float64(a.dataOps) / secs
		rep.MetaRate = float64(rep.MetaOps) / secs
	}
	prevWrite := int64(-1 << 62)
	var firstBurst, lastBurst int64
	var burstBytes uint64
	for _, p := range rep.Timeline {
		// the peak counts windows busy for at least a quarter of their
		// length (a burst of a few ms says little about bandwidth)
		d := max(a.span(p.Window), window/4)
		if bw := float64(p.ReadBytes+p.WriteBytes) / d.Seconds(); bw > rep.PeakBW {
			rep.PeakBW = bw
		}
		if p.WriteBytes > 0 {
			if p.Window-prevWrite > int64(window) {
				rep.Bursts++
				if rep.Bursts == 1 {
					firstBurst = p.Window
				}
				lastBurst = p.Window
			}
			prevWrite = p.Window
			burstBytes += p.WriteBytes
		}
	}
	if rep.Bursts > 0 {
		rep.BurstBytes = burstBytes / uint64(rep.Bursts)
	}
	if rep.Bursts > 1 {
		rep.BurstEvery = time.Duration((lastBurst - firstBurst) / int64(rep.Bursts-1))
	}
}

// summary makes the request sizes, the ranks' times and the servers'
// use.
func (a *analyzer) summary() {
	rep := a.rep
	if a.dataOps > 0 {
		rep.SeqShare = float64(a.seq) / float64(a.dataOps)
		rep.MeanRequest = (rep.ReadBytes + rep.WriteBytes) / a.dataOps
	}
	for s, n := range a.sizes {
		rep.Sizes = append(rep.Sizes, SizeBin{Size: s, Ops: n})
	}
	sortBins(rep.Sizes)
	for _, rt := range a.perRank {
		rep.PerRank = append(rep.PerRank, *rt)
	}
	sort.Slice(rep.PerRank, func(i, j int) bool { return rep.PerRank[i].Rank < rep.PerRank[j].Rank })
	rep.Imbalance = imbalance(rep.PerRank)
	for _, su := range a.servers {
		rep.Servers = append(rep.Servers, *su)
	}
	sort.Slice(rep.Servers, func(i, j int) bool {
		if rep.Servers[i].Layer != rep.Servers[j].Layer {
			return rep.Servers[i].Layer < rep.Servers[j].Layer
		}
		return rep.Servers[i].Server < rep.Servers[j].Server
	})
}

// FileShare is how much of a job's data one file holds and how many ranks
// touched it.
type FileShare struct {
	Bytes uint64
	Ranks int
}

// ioMode names the I/O mode from which ranks touched which files, ignoring
// files with under 1 % of the bytes (logs, side files).
func ioMode(ioRanks int, files []FileShare, total uint64) string {
	var big, shared int
	for _, f := range files {
		if total > 0 && f.Bytes*100 < total {
			continue
		}
		big++
		if f.Ranks > 1 {
			shared++
		}
	}
	switch {
	case ioRanks == 0:
		return ModeNone
	case ioRanks == 1:
		return Mode1
	case big == 1 && shared == 1:
		return ModeN1
	case shared == 0:
		return ModeNN
	}
	return ModeNM
}

func classify(rep *JobReport, dataOps uint64, th Thresholds) []string {
	var out []string
	total := rep.ReadBytes + rep.WriteBytes
	allOps := dataOps + rep.MetaOps
	if rep.MetaOps >= th.MetaOps && float64(rep.MetaOps) >= th.MetaShare*float64(allOps) {
		out = append(out, ClassMetadata)
	}
	var small uint64
	for _, b := range rep.Sizes {
		if b.Size <= th.SmallRequest {
			small += b.Ops
		}
	}
	if small >= th.IOPSOps && small*2 >= dataOps {
		out = append(out, ClassIOPS)
	}
	if total >= th.BandwidthBytes && rep.MeanRequest >= th.LargeRequest {
		if rep.Bursts >= th.CkptBursts && rep.WriteBytes*10 >= total*8 {
			out = append(out, ClassCheckpoint)
		} else {
			out = append(out, ClassBandwidth)
		}
	}
	return out
}

// SizeClass is the request-size class of an n-byte request: 4 KiB, or
// the next power of two.
func SizeClass(n uint64) uint64 {
	if n <= 4096 {
		return 4096
	}
	return 1 << bits.Len64(n-1)
}

func imbalance(rs []RankTime) float64 {
	if len(rs) < 2 {
		return 1
	}
	ts := make([]time.Duration, len(rs))
	for i, r := range rs {
		ts[i] = r.Time
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	med := ts[len(ts)/2]
	if len(ts)%2 == 0 {
		med = (ts[len(ts)/2-1] + ts[len(ts)/2]) / 2
	}
	if med <= 0 {
		return 1
	}
	return float64(ts[len(ts)-1]) / float64(med)
}

func sortBins(b []SizeBin) { sort.Slice(b, func(i, j int) bool { return b[i].Size < b[j].Size }) }
