package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand"
	"sort"

	"github.com/sluice-hpc/sluice/beacon"
	"github.com/sluice-hpc/sluice/sim/machine"
	"github.com/sluice-hpc/sluice/sim/swf"
)

// Job is one job of a simulated workload: when it is submitted, how many
// compute nodes it runs on, how long it computes, and its I/O. It is
// written as one JSON object per line (`sluice sim day --jobs FILE`).
type Job struct {
	ID      string  `json:"id"`
	App     string  `json:"app"`     // application: jobs of one app behave alike (Beacon's profiles)
	Submit  float64 `json:"submit"`  // seconds from the start of the run
	Nodes   int     `json:"nodes"`   // compute nodes
	Compute float64 `json:"compute"` // seconds of computation in all
	Pattern string  `json:"pattern"` // N-N, N-M, N-1 or 1-1 (beacon modes)
	Class   string  `json:"class"`   // interference class (the machine's: bw, n1, meta, iops, single)
	Read    float64 `json:"read"`    // bytes read, in one phase at the start (ReadBack: at the end)
	Write   float64 `json:"write"`   // bytes written, in Phases equal phases
	// ReadBack: its read comes after its writes (what it wrote, read
	// back: `sluice workload`'s write-and-read behaviours).
	ReadBack bool `json:"read_back,omitempty"`
	Phases   int  `json:"phases"` // write phases (checkpoints), ≥ 1
	// BurstPhases: its write phases come in bursts of this many, its
	// computation split between the bursts, before each (a writer of
	// files in bursts with pauses between; 0: before every phase).
	BurstPhases int     `json:"burst_phases,omitempty"`
	MetaOps     float64 `json:"meta_ops"`
	// Requests are the operations its data I/O costs a forwarding node
	// beyond the metadata operations (small requests; 0: not counted).
	Requests float64 `json:"requests,omitempty"`
	// NodeBW and OpsRate are the job's own limits, what it reaches alone
	// (Beacon's profile: bytes/s per I/O node while active, operations/s
	// in all); 0: the machine's node link, none.
	NodeBW  float64 `json:"node_bw,omitempty"`
	OpsRate float64 `json:"ops_rate,omitempty"`
	// SetupBytes and SetupRequests are I/O before the job's own (a
	// replayed run's preparation: creating the files it then reads), a
	// phase of their own at the start, left out of its I/O time; Hold is
	// how long it keeps its nodes after its last phase (a replayed run's
	// teardown), seconds.
	SetupBytes    float64 `json:"setup_bytes,omitempty"`
	SetupRequests float64 `json:"setup_requests,omitempty"`
	Hold          float64 `json:"hold,omitempty"`
	// Lead is how long it waits before its first I/O (a replayed run's
	// launch and start barrier), seconds.
	Lead float64 `json:"lead,omitempty"`
	// OnNodes are the compute nodes the job runs on (a scheduler's
	// placement, as in a replayed run); empty: the simulator's first fit.
	OnNodes []int `json:"on_nodes,omitempty"`
	// Profile, if set, is what the forwarding allocation knows of the
	// application when the job starts (Beacon's, `sluice profile show
	// --json`), instead of what the simulator learned from its earlier
	// simulated jobs.
	Profile *beacon.Profile `json:"profile,omitempty"`
	// Warmup: the job runs (it contends, and its application's profile
	// learns from it) but is left out of the results' statistics.
	Warmup bool `json:"warmup,omitempty"`
}

// Mix is the share of jobs per I/O pattern with their mean read and
// write volumes per job (bytes).
type Mix struct {
	Pattern     string
	Jobs        float64
	Read, Write float64
}

// TaihuLightMix is Table 1 of the Sunway storage paper: I/O pattern
// statistics of the jobs of TaihuLight.
var TaihuLightMix = []Mix{
	{"N-N", 11073, 96.8e9, 120.1e9},
	{"N-M", 324, 36.2e9, 63.2e9},
	{"N-1", 2382, 19.6e9, 19.3e9},
	{"1-1", 16251, 33.0e9, 142.3e9},
}

// GenOptions say how a job log becomes a workload.
type GenOptions struct {
	Seed int64
	// From and For select the jobs that start in [From, From+For)
	// seconds of the log (For 0: all of them). Warmup adds the jobs of
	// the Warmup seconds before From as warm-up jobs (they build the
	// applications' history, as a deployed system has it). Times are
	// taken relative to From − Warmup.
	From, For, Warmup float64
	// Scale multiplies jobs' processor counts into compute nodes (0: the
	// machine's nodes over the log's largest job, so the largest job
	// fills the machine).
	Scale float64
	Mix   []Mix // nil: TaihuLightMix
	// VolumeScale multiplies every volume (1 if 0).
	VolumeScale float64
	// Profiles, if set, replace Mix: each application draws one of these
	// application profiles (Beacon's, `sluice profile show --json`, or
	// Darshan logs imported) and its jobs do what the profile shows, per
	// I/O node: its pattern and behaviour, its volumes and metadata
	// operations per I/O node times the job's I/O nodes, its bandwidth
	// per I/O node as the job's own limit (JobFromProfile).
	Profiles []beacon.Profile
}

// FromSWF gives the jobs of a log I/O behaviour for machine m: each
// application (the log's application number, or its user when unknown)
// draws a pattern from the mix in its shares, a volume around the
// pattern's mean (exponentially distributed, as job volumes are heavy
// tailed) and an interference class; each of its jobs moves that volume
// ±20 %. Job sizes are scaled by Scale; compute time is the logged run
// time. Deterministic in Seed.
func FromSWF(log []swf.Job, m *machine.Machine, o GenOptions) []Job {
	mix := o.Mix
	if mix == nil {
		mix = TaihuLightMix
	}
	vs := o.VolumeScale
	if vs == 0 {
		vs = 1
	}
	scale := o.Scale
	if scale == 0 {
		most := 1
		for _, j := range log {
			most = max(most, j.Procs)
		}
		scale = float64(m.ComputeNodes) / float64(most)
	}
	var total float64
	for _, x := range mix {
		total += x.Jobs
	}
	apps := &swfApps{mix: mix, total: total, vs: vs, o: o, apps: map[string]*swfApp{}}
	var out []Job
	for _, j := range log {
		st := j.Start()
		if st < o.From-o.Warmup || o.For > 0 && st >= o.From+o.For {
			continue
		}
		key := fmt.Sprintf("app%d", j.App)
		if j.App < 0 {
			key = fmt.Sprintf("user%d", j.User)
		}
		a := apps.of(key)
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/job%d", o.Seed, j.ID)
		r := rand.New(rand.NewSource(int64(h.Sum64())))
		jit := func() float64 { return 0.8 + 0.4*r.Float64() }
		nodes := max(1, min(m.ComputeNodes, int(math.Round(float64(j.Procs)*scale))))
		phases := max(1, min(8, int(j.Run/3600)+1))
		if a.profile != nil {
			pj := JobFromProfile(*a.profile, nodes, vs*jit())
			pj.ID, pj.App, pj.Submit, pj.Warmup, pj.Compute, pj.Phases = fmt.Sprintf("j%d", j.ID), key, st-(o.From-o.Warmup), st < o.From, j.Run, phases
			out = append(out, pj)
			continue
		}
		out = append(out, Job{ID: fmt.Sprintf("j%d", j.ID), App: key, Submit: st - (o.From - o.Warmup), Warmup: st < o.From, Nodes: nodes, Compute: j.Run,
			Pattern: a.mix.Pattern, Class: a.class, Read: a.read * jit(), Write: a.write * jit(), Phases: phases,
			MetaOps: a.metaPerNode * float64(ioNodes(a.mix.Pattern, nodes))})
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].Submit < out[k].Submit })
	return out
}

// swfApp is an application of a job log as FromSWF draws it: its mix
// entry, interference class and volumes, or a profile it replays.
type swfApp struct {
	mix         Mix
	class       string
	read, write float64
	metaPerNode float64
	profile     *beacon.Profile
}

// swfApps draws each application of a job log once, from its key and the
// seed.
type swfApps struct {
	mix       []Mix
	total, vs float64 // the mix's jobs in all, the volume scale
	o         GenOptions
	apps      map[string]*swfApp
}

// of is the application of key.
func (s *swfApps) of(key string) *swfApp {
	if a := s.apps[key]; a != nil {
		return a
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", s.o.Seed, key)
	r := rand.New(rand.NewSource(int64(h.Sum64())))
	a := &swfApp{mix: s.mix[len(s.mix)-1]}
	s.apps[key] = a
	if len(s.o.Profiles) > 0 {
		a.profile = &s.o.Profiles[r.Intn(len(s.o.Profiles))]
		return a
	}
	x := r.Float64() * s.total
	for _, mx := range s.mix {
		if x < mx.Jobs {
			a.mix = mx
			break
		}
		x -= mx.Jobs
	}
	a.read = a.mix.Read * r.ExpFloat64() * s.vs
	a.write = a.mix.Write * r.ExpFloat64() * s.vs
	a.metaPerNode = 20
	switch a.mix.Pattern {
	case "N-1":
		a.class = "n1"
	case "1-1":
		a.class = "single"
	default:
		switch c := r.Float64(); {
		case c < 0.1:
			a.class, a.metaPerNode = "meta", 20000
		case c < 0.2:
			a.class = "iops"
		default:
			a.class = "bw"
		}
	}
	return a
}

// JobFromProfile is a job of nodes compute nodes doing what application
// profile p shows (Beacon's, or a Darshan log's): its pattern (N-N when
// the profile has none), its behaviour as an interference class (N-1 →
// n1, 1-1 → single, else metadata → meta, IOPS → iops, else bw), and per
// I/O node the profile's read and write volumes and metadata operations
// (times scale) and its bandwidth while active (NodeBW, the job's own
// limit). One phase; the caller sets the rest.
func JobFromProfile(p beacon.Profile, nodes int, scale float64) Job {
	pat := p.Mode
	switch pat {
	case beacon.ModeNN, beacon.ModeNM, beacon.ModeN1, beacon.Mode1:
	default:
		pat = beacon.ModeNN
	}
	class := "bw"
	switch {
	case pat == beacon.ModeN1:
		class = "n1"
	case pat == beacon.Mode1:
		class = "single"
	case p.Has(beacon.ClassMetadata):
		class = "meta"
	case p.Has(beacon.ClassIOPS):
		class = "iops"
	}
	per := scale / float64(max(1, p.IONodes))
	io := float64(ioNodes(pat, nodes))
	return Job{App: p.Key, Nodes: nodes, Pattern: pat, Class: class, Phases: 1,
		Read: float64(p.ReadBytes) * per * io, Write: float64(p.WriteBytes) * per * io, MetaOps: float64(p.MetaOps) * per * io,
		NodeBW: p.NodeBW}
}

// ioNodes is how many of a job's nodes do I/O in a pattern: all of them
// (N-N, N-1), one in eight (N-M: M = N/8, assumed), or one (1-1).
func ioNodes(pattern string, nodes int) int {
	switch pattern {
	case "1-1":
		return 1
	case "N-M":
		return max(1, (nodes+7)/8)
	}
	return nodes
}

// WriteJobs writes jobs as JSON Lines.
func WriteJobs(w io.Writer, jobs []Job) error {
	enc := json.NewEncoder(w)
	for _, j := range jobs {
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return nil
}

// ReadProfiles reads application profiles as JSON Lines (`sluice profile
// show --json`); none is an error.
func ReadProfiles(r io.Reader) ([]beacon.Profile, error) {
	d := json.NewDecoder(r)
	var out []beacon.Profile
	for {
		var p beacon.Profile
		if err := d.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("profile %d: %w", len(out)+1, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no profiles")
	}
	return out, nil
}

// ReadJobs reads jobs written by WriteJobs.
func ReadJobs(r io.Reader) ([]Job, error) {
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	var out []Job
	for {
		var j Job
		if err := d.Decode(&j); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("job %d: %w", len(out)+1, err)
		}
		if j.Nodes <= 0 || j.Phases <= 0 || j.Read < 0 || j.Write < 0 || j.Compute < 0 || j.MetaOps < 0 ||
			j.Requests < 0 || j.NodeBW < 0 || j.OpsRate < 0 || j.SetupBytes < 0 || j.SetupRequests < 0 || j.Hold < 0 || j.Lead < 0 {
			return nil, fmt.Errorf("job %d (%s): nodes and phases must be > 0, volumes, rates and times ≥ 0", len(out)+1, j.ID)
		}
		if len(j.OnNodes) > 0 && len(j.OnNodes) != j.Nodes {
			return nil, fmt.Errorf("job %d (%s): %d nodes but on_nodes lists %d", len(out)+1, j.ID, j.Nodes, len(j.OnNodes))
		}
		out = append(out, j)
	}
	return out, nil
}
