package bbos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta"
	pol "github.com/sluice-hpc/sluice/policy/bbos"
)

const mib = 1 << 20

// rates make MaxDWPP 2.1 S.
var rates = pol.Rates{WriteMax: 1000e6, WriteMin: 700e6, DemoteMin: 100e6, DemoteMax: 367e6}

// fakeFile is a checkpoint file of the fake namespace.
type fakeFile struct {
	name   string
	parent uint64
	size   uint64
	mtime  int64
	open   bool
	locs   []wire.ChunkLoc
}

// fakeNS is a metadata service with one mem server (1) of capacity S and
// a pfs server (2), directories by name under the root, and files.
type fakeNS struct {
	mu       sync.Mutex
	s        uint64
	grants   []api.Grant
	dirs     map[string]uint64 // name under the root → ino
	files    map[uint64]*fakeFile
	state    api.BBServerState // what server 1 answers
	controls []api.BBControl   // what it was sent
	moves    []string          // demote/evict calls, in order
	stalled  int               // writers waiting for room on mem
	stalledF map[uint64]bool   // the files they write
	hold     chan struct{}     // if set, a demotion waits for it to close
	busyIno  uint64            // if set, demoting it fails: it is migrating already
	promised uint64            // bytes placement promised on mem since its report
	// listed, if set, is called once after directory listedDir has been
	// listed (not under mu), and cleared
	listed    func()
	listedDir uint64
}

func (f *fakeNS) StalledWriters(tier string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tier != "mem" {
		return 0
	}
	return f.stalled
}

func (f *fakeNS) StalledFile(tier string, ino uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return tier == "mem" && f.stalledF[ino]
}

func newFake(s uint64) *fakeNS {
	return &fakeNS{s: s, dirs: map[string]uint64{}, files: map[uint64]*fakeFile{}}
}

// Servers is placement's view: server 1 holds the files' chunks on mem
// and the room promised since.
func (f *fakeNS) Servers() []wire.ServerInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := f.promised
	for _, ff := range f.files {
		for _, l := range ff.locs {
			if l.Tier == "mem" {
				used += ff.size / uint64(len(ff.locs))
			}
		}
	}
	return []wire.ServerInfo{
		{ID: 1, Role: "data", Tier: "mem", Capacity: f.s, Used: used, Alive: true},
		{ID: 2, Role: "data", Tier: "pfs", Capacity: 1 << 40, Alive: true},
		{ID: 3, Role: "fwd", Alive: true},
	}
}

// List implements Config.Grants.
func (f *fakeNS) List() ([]api.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.Grant(nil), f.grants...), nil
}

func (f *fakeNS) Lookup(parent uint64, name string) (*wire.Attr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ino, ok := f.dirs[name]; ok && parent == meta.RootIno {
		return &wire.Attr{Ino: ino, Mode: syscall.S_IFDIR}, nil
	}
	return nil, syscall.ENOENT
}

func (f *fakeNS) Getattr(ino uint64) (*wire.Attr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ff := f.files[ino]
	if ff == nil {
		return nil, syscall.ENOENT
	}
	return &wire.Attr{Ino: ino, Size: ff.size, Mtime: ff.mtime, Mode: syscall.S_IFREG}, nil
}

func (f *fakeNS) Readdir(dir uint64, after string, max int) ([]wire.DirEntry, error) {
	f.mu.Lock()
	var out []wire.DirEntry
	for ino, ff := range f.files {
		if ff.parent == dir && ff.name > after {
			out = append(out, wire.DirEntry{Name: ff.name, Ino: ino, Mode: syscall.S_IFREG})
		}
	}
	var listed func()
	if dir == f.listedDir {
		listed, f.listed = f.listed, nil
	}
	f.mu.Unlock()
	if listed != nil {
		listed()
	}
	return out, nil
}

func (f *fakeNS) Layout(ino uint64) ([]wire.ChunkLoc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]wire.ChunkLoc(nil), f.files[ino].locs...), nil
}

func (f *fakeNS) Activity(ino uint64) (wire.Activity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files[ino].open {
		return wire.Activity{Open: 1}, nil
	}
	return wire.Activity{LastClose: f.files[ino].mtime}, nil
}

func (f *fakeNS) BBServer(_ context.Context, id uint64, set *api.BBControl) (*api.BBServerState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != 1 {
		return nil, fmt.Errorf("unexpected call to %d", id)
	}
	if set != nil {
		f.controls = append(f.controls, *set)
	}
	st := f.state
	st.Capacity = f.s
	for _, ff := range f.files {
		for _, l := range ff.locs {
			if l.Tier == "mem" {
				st.Used += ff.size / uint64(len(ff.locs))
			}
		}
	}
	return &st, nil
}

func (f *fakeNS) Demote(_ context.Context, ino uint64) (uint64, error) {
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ff := f.files[ino]
	f.moves = append(f.moves, "demote "+ff.name)
	if ino == f.busyIno {
		return 0, rpc.Errorf(syscall.EBUSY, "inode %d is migrating already", ino)
	}
	var n uint64
	for i := range ff.locs {
		if ff.locs[i].Tier == "mem" {
			ff.locs[i].Home = []uint64{2}
			n += 4 * mib
		}
	}
	return min(n, ff.size), nil
}

// Evict drops the mem copies of the chunks (those spilled to the pfs
// tier are there already).
func (f *fakeNS) Evict(_ context.Context, ino uint64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ff := f.files[ino]
	f.moves = append(f.moves, "evict "+ff.name)
	n := 0
	for i := range ff.locs {
		if ff.locs[i].Tier == "mem" {
			ff.locs[i] = wire.ChunkLoc{Idx: ff.locs[i].Idx, Tier: "pfs", Servers: []uint64{2}}
			n++
		}
	}
	return n, nil
}

// ckpt adds a closed checkpoint file of 4 MiB chunks on the mem server.
func (f *fakeNS) ckpt(ino uint64, dir, name string, size uint64, mtime int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs[dir] == 0 {
		f.dirs[dir] = 1000 + uint64(len(f.dirs))
	}
	ff := &fakeFile{name: name, parent: f.dirs[dir], size: size, mtime: mtime}
	for i := uint64(0); i*4*mib < size; i++ {
		ff.locs = append(ff.locs, wire.ChunkLoc{Idx: i, Tier: "mem", Servers: []uint64{1}})
	}
	f.files[ino] = ff
}

func (f *fakeNS) lastControl() api.BBControl {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.controls[len(f.controls)-1]
}

func (f *fakeNS) movesSoFar() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.moves, ", ")
}

// decisions keeps the manager's decisions: "demote NAME" in order.
type decisions struct {
	mu  sync.Mutex
	got []string
}

func (d *decisions) PutDecision(_ string, _ time.Time, v []byte) error {
	var dec struct {
		Event   string
		Reasons []string
	}
	json.Unmarshal(v, &dec)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, dec.Event+" "+strings.Fields(dec.Reasons[0])[1])
	return nil
}

func (d *decisions) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.got, ", ")
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newManager(f *fakeNS, p pol.Policy, c *clock) *Manager {
	return New(Config{NS: f, Grants: f, Mover: f, Policy: p, Rates: rates, Bypass: true, Now: c.now})
}

// tick runs a tick and waits for the demotions and evictions it started.
func tick(t *testing.T, m *Manager) {
	t.Helper()
	m.Tick(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		n := len(m.busy)
		m.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("demotions or evictions did not end")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestControlFollowsThePlan: the servers get the caps of the period plan
// for what the grants declare and what the servers say was written, the
// scheduler under every policy but dedicated, and full-speed demotion
// while idle.
func TestControlFollowsThePlan(t *testing.T) {
	const s = 100 * mib
	c := &clock{time.Unix(1000, 0)}
	f := newFake(s)
	f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 90 * mib, Period: 100}, {Job: "2", Pool: "mem", Size: 90 * mib, Period: 100}}
	m := newManager(f, pol.BBOS, c)
	f.state = api.BBServerState{JobWritten: 500 * mib, LastJobWrite: c.t.UnixNano()}
	tick(t, m) // the server's count so far is the period's base
	f.state.JobWritten += 60 * mib
	tick(t, m)
	pl, _ := pol.PlanPeriod(pol.BBOS, 180*mib, s, rates)
	w, d := pol.Throttle(pol.BBOS, pl, 60*mib, 180*mib, true, rates)
	ctl := f.lastControl()
	if !ctl.Sched || ctl.WriteCap != w || ctl.DemoteCap != max(d, rates.DemoteMin) || ctl.IdleDemoteCap != rates.DemoteMax || ctl.DemoteHold {
		t.Fatalf("control %+v, want the plan's write %.0f and demotion %.0f while writing, full speed while idle, with the scheduler", ctl, w, d)
	}
	st := m.Status().Pools[0]
	if st.DWSF != 60*mib || st.DWPP != 180*mib || st.Pattern != pl.Pattern.String() || !st.Writing {
		t.Fatalf("pool %+v", st)
	}
	c.t = c.t.Add(time.Second) // no write for a second: idle
	tick(t, m)
	if st := m.Status().Pools[0]; st.Writing || st.Demote != rates.DemoteMax {
		t.Fatalf("idle: pool %+v, want full-speed demotion", st)
	}
	// the period ends: what it wrote predicts the next one
	f.state.JobWritten += 240 * mib
	tick(t, m)
	c.t = c.t.Add(100 * time.Second)
	tick(t, m)
	if st := m.Status().Pools[0]; len(st.History) != 1 || st.History[0] != 300*mib || st.DWSF != 0 || st.DWPP != 300*mib {
		t.Fatalf("after the period: %+v, want 300 MiB measured and predicted", st)
	}
	// dedicated: no scheduler; no grants: the controls are lifted
	md := newManager(f, pol.Dedicated, c)
	tick(t, md)
	if f.lastControl().Sched {
		t.Fatal("dedicated schedules I/O phases (DataWarp does not)")
	}
	f.grants = nil
	tick(t, md)
	if ctl := f.lastControl(); ctl != (api.BBControl{}) {
		t.Fatalf("no grants left: control %+v, want none", ctl)
	}
	if len(md.Status().Pools) != 0 {
		t.Fatal("a pool without grants is still managed")
	}
}

// fiveVersions is a 52 MiB buffer holding five closed checkpoints of 8 MiB
// of three applications: a (MTBF 10 min: a1, a2), b (1 h: b1, b2), c
// (2 h: c1), written in the order a1, b1, a2, c1, b2.
func fiveVersions() *fakeNS {
	f := newFake(52 * mib)
	f.grants = []api.Grant{
		{Job: "1", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/a/*", MTBF: 600},
		{Job: "2", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/b/*", MTBF: 3600},
		{Job: "3", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/c/*", MTBF: 7200},
	}
	f.ckpt(10, "a", "a1", 8*mib, 1)
	f.ckpt(11, "b", "b1", 8*mib, 2)
	f.ckpt(12, "a", "a2", 8*mib, 3)
	f.ckpt(13, "c", "c1", 8*mib, 4)
	f.ckpt(14, "b", "b2", 8*mib, 5)
	return f
}

// TestDemotionAndEviction: idle, the manager demotes one file at a time
// in the policy's cold order; when the buffer runs short of room for the
// largest checkpoint it evicts demoted copies in the same order.
func TestDemotionAndEviction(t *testing.T) {
	for _, c := range []struct {
		p          pol.Policy
		noVersions bool
		want       string // demotions
		evict      string // the first eviction
	}{
		// older versions first (a1, then b1), then the highest MTBF (c1
		// before b2 and a2, whose applications restart more often); b2
		// is written during the first tick, two files demote at once
		{pol.BBOS, false, "demote a1, demote b1, demote c1, demote b2, demote a2", "evict a1"},
		// MTBF alone: c1, then b's, then a's
		{pol.BBOS, true, "demote c1, demote b1, demote b2, demote a1, demote a2", "evict c1"},
		{pol.FIFO, false, "demote a1, demote b1, demote a2, demote c1, demote b2", "evict a1"},
	} {
		t.Run(fmt.Sprintf("%s-noversions=%v", c.p, c.noVersions), func(t *testing.T) {
			clk := &clock{time.Unix(1000, 0)}
			f := fiveVersions()
			f.files[14].open = true // being written: not yet
			log := &decisions{}
			m := New(Config{NS: f, Grants: f, Mover: f, Policy: c.p, Rates: rates, NoVersions: c.noVersions, Now: clk.now, Decisions: log})
			tick(t, m)
			f.mu.Lock()
			f.files[14].open = false
			f.mu.Unlock()
			for i := 0; i < 3; i++ {
				tick(t, m)
			}
			if got := log.String(); got != c.want {
				t.Fatalf("moves %q, want %q", got, c.want)
			}
			// 40 MiB of 52 leaves room for the largest checkpoint above
			// the 4 MiB stall reserve; a new one fills the buffer, and
			// room is made by evicting the coldest demoted copy (c1 is an
			// old version now)
			f.mu.Lock()
			f.moves = nil
			f.mu.Unlock()
			tick(t, m)
			if got := f.movesSoFar(); got != "" {
				t.Fatalf("evicted %q with room left", got)
			}
			f.ckpt(15, "c", "c2", 8*mib, 6)
			f.files[15].open = true
			tick(t, m)
			if got := f.movesSoFar(); got != c.evict {
				t.Fatalf("evictions %q, want %q", got, c.evict)
			}
			if tot := m.Status().Totals; tot.DemotedFiles != 5 || tot.Demoted != 40*mib || tot.EvictedFiles != 1 || tot.Evicted != 8*mib {
				t.Fatalf("totals %+v", tot)
			}
		})
	}
}

// TestStalledWritersGetRoom: writers waiting at placement for room make
// the deleters free room for each of them at once (at most half the
// buffer), coldest first, rather than one checkpoint per tick.
func TestStalledWritersGetRoom(t *testing.T) {
	f, m := demotedFive(t, 2)
	tick(t, m)
	// room for 3 checkpoints above the reserve: 28 MiB, 16 to free
	// (they run at once: in either order)
	if got := strings.Split(f.movesSoFar(), ", "); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"evict a1", "evict b1"}) {
		t.Fatalf("evictions %q, want the two coldest at once", got)
	}
	f.mu.Lock()
	f.moves, f.stalled = nil, 10
	f.mu.Unlock()
	tick(t, m)
	// at most half the buffer (26 MiB) above the reserve: 30 free of
	// 52 after the first two, one more
	if got := f.movesSoFar(); got != "evict c1" {
		t.Fatalf("evictions %q, want c1 alone (half the buffer)", got)
	}
}

// demotedFive is fiveVersions under BBOS once all five are demoted,
// with stalled writers waiting for room on the buffer.
func demotedFive(t *testing.T, stalled int) (*fakeNS, *Manager) {
	t.Helper()
	f := fiveVersions()
	m := newManager(f, pol.BBOS, &clock{time.Unix(1000, 0)})
	for i := 0; i < 4; i++ {
		tick(t, m)
	}
	if tot := m.Status().Totals; tot.DemotedFiles != 5 || tot.EvictedFiles != 0 {
		t.Fatalf("totals %+v: want all five demoted, none evicted (12 MiB free is the room for one)", tot)
	}
	f.mu.Lock()
	f.moves, f.stalled = nil, stalled
	f.mu.Unlock()
	return f, m
}

// TestKickFreesRoom: a writer that begins to wait for room (Kick, from
// the metadata service) has the deleters free room at once, without a
// tick.
func TestKickFreesRoom(t *testing.T) {
	f, m := demotedFive(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx, nil) // no ticks
	m.Kick()
	waitEvicted(t, f, 2, "after a kick, want the two coldest evicted")
}

// waitEvicted waits until f has seen n evictions; why says what was
// wanted if they do not come.
func waitEvicted(t *testing.T, f *fakeNS, n int, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(f.movesSoFar(), "evict") < n {
		if time.Now().After(deadline) {
			t.Fatalf("moves %q %s", f.movesSoFar(), why)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKickSeesPlacement: between ticks the deleters judge the free space
// by placement's view, which counts the chunks promised since the tick:
// at a burst's start the writes since the tick have taken the room the
// tick saw, and room for every stalled writer is freed at the first kick
// (it was one checkpoint per stalled writer, kick after kick, while the
// others waited).
func TestKickSeesPlacement(t *testing.T) {
	f, m := demotedFive(t, 2)
	f.mu.Lock()
	f.promised = 12 * mib // the 12 MiB the tick saw free are placed
	f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx, nil) // no ticks
	m.Kick()
	// room for 3 checkpoints above the reserve (28 MiB) with nothing
	// free: the four coldest
	waitEvicted(t, f, 4, "after a kick with placement's room gone, want four evicted")
	time.Sleep(20 * time.Millisecond)
	if n := strings.Count(f.movesSoFar(), "evict"); n != 4 {
		t.Fatalf("%d evicted (%q), want four", n, f.movesSoFar())
	}
}

// TestReserveWhileDemoting: a buffer whose only closed checkpoint is being
// demoted keeps its stall reserve (writers wait for the room its eviction
// will make rather than spill to the PFS), and so does one whose only
// checkpoint is being written, until its writer waits for room itself.
func TestReserveWhileDemoting(t *testing.T) {
	clk := &clock{time.Unix(1000, 0)}
	f := newFake(32 * mib) // room for its next version beside it: nothing evicted
	f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/a/*"}}
	f.ckpt(10, "a", "a1", 8*mib, 1)
	f.hold = make(chan struct{})
	m := newManager(f, pol.BBOS, clk)
	m.Tick(context.Background()) // the demotion starts and waits
	m.Tick(context.Background())
	si := wire.ServerInfo{ID: 1, Tier: "mem"}
	if m.StallReserve(si) == 0 {
		t.Fatal("no stall reserve while the buffer's checkpoint is being demoted")
	}
	close(f.hold)
	tick(t, m)
	f.mu.Lock()
	f.files[10].open = true // written again: room comes when it closes
	f.mu.Unlock()
	tick(t, m)
	if m.StallReserve(si) == 0 {
		t.Fatal("no stall reserve while the buffer's checkpoint is written by a writer that does not wait for room")
	}
	f.mu.Lock()
	f.stalled, f.stalledF = 1, map[uint64]bool{10: true} // its writer waits for room: it cannot close
	f.mu.Unlock()
	tick(t, m)
	if m.StallReserve(si) != 0 {
		t.Fatal("a stall reserve with nothing on the buffer to free")
	}
}

// TestEvictedBytes: an eviction counts the bytes of the chunks it dropped
// (a checkpoint that spilled half its chunks to the PFS frees half).
func TestEvictedBytes(t *testing.T) {
	clk := &clock{time.Unix(1000, 0)}
	f := newFake(20 * mib) // 8 free: room for 8 and the reserve of 4 is one eviction of 4 away
	f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/a/*"}}
	f.ckpt(10, "a", "a1", 8*mib, 1)
	f.files[10].locs[1] = wire.ChunkLoc{Idx: 1, Tier: "pfs", Servers: []uint64{2}}
	f.ckpt(11, "a", "a2", 8*mib, 2)
	m := newManager(f, pol.BBOS, clk)
	for i := 0; i < 4; i++ {
		tick(t, m)
	}
	// the two demotions run at once
	if got := strings.Split(f.movesSoFar(), ", "); len(got) != 3 || got[2] != "evict a1" {
		t.Fatalf("moves %q", got)
	}
	if tot := m.Status().Totals; tot.Demoted != 12*mib || tot.Evicted != 4*mib || tot.EvictedFiles != 1 {
		t.Fatalf("totals %+v: want 12 MiB demoted, 4 MiB evicted", tot)
	}
}

// TestWritingHoldsDemotion: below the plan's threshold, and always under
// MaxBW, the servers hold demotion while checkpoints are written and
// demote at full speed once idle.
func TestWritingHoldsDemotion(t *testing.T) {
	for _, p := range []pol.Policy{pol.BBOS, pol.MaxBW} {
		clk := &clock{time.Unix(1000, 0)}
		f := newFake(100 * mib)
		f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 50 * mib, Period: 100, Checkpoint: "/a/*"}}
		f.ckpt(10, "a", "a1", 8*mib, 1)
		f.state = api.BBServerState{LastJobWrite: clk.t.UnixNano()}
		m := newManager(f, p, clk)
		tick(t, m)
		if ctl := f.lastControl(); !ctl.DemoteHold || ctl.IdleDemoteCap != rates.DemoteMax {
			t.Fatalf("%s: control %+v, want demotion held while writing, full speed idle", p, ctl)
		}
		if m.StallReserve(wire.ServerInfo{ID: 1, Tier: "mem"}) == 0 {
			t.Fatalf("%s: no stall reserve on a buffer with data it can demote", p)
		}
		if m.StallReserve(wire.ServerInfo{ID: 2, Tier: "pfs"}) != 0 {
			t.Fatalf("%s: a stall reserve on the pfs tier", p)
		}
		if !m.Managed(10) || m.Managed(99) {
			t.Fatalf("%s: managed files wrong", p)
		}
	}
	// past the threshold bbos demotes while writing
	clk := &clock{time.Unix(1000, 0)}
	f := newFake(100 * mib)
	f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 190 * mib, Period: 100, Checkpoint: "/a/*"}}
	f.state = api.BBServerState{LastJobWrite: clk.t.UnixNano()}
	m := newManager(f, pol.BBOS, clk)
	tick(t, m)
	if ctl := f.lastControl(); ctl.DemoteHold || ctl.DemoteCap < rates.DemoteMin {
		t.Fatalf("bbos at 1.9 S: control %+v, want demotion while writing", ctl)
	}
}

// TestBypass: once the period has written more than the buffer takes, a
// new checkpoint of the sequence least likely to be read is placed on the
// PFS, once per file; others, and other policies, are not.
// ckptGrant is job's grant of a 16 MiB checkpoint every 100 s in
// directory dir, failing every mtbf seconds.
func ckptGrant(job, dir string, mtbf float64) api.Grant {
	return api.Grant{Job: job, Pool: "mem", Size: 16 * mib, Period: 100, Checkpoint: "/" + dir + "/*", MTBF: mtbf}
}

// bypassing is a BBOS manager with bypass on over a 40 MiB buffer that
// grants g, whose server has just seen a job's write.
func bypassing(t *testing.T, g ...api.Grant) (*fakeNS, *Manager, *clock) {
	t.Helper()
	clk := &clock{time.Unix(1000, 0)}
	f := newFake(40 * mib)
	f.grants = g
	f.state = api.BBServerState{LastJobWrite: clk.t.UnixNano()}
	return f, newManager(f, pol.BBOS, clk), clk
}

func TestBypass(t *testing.T) {
	f, m, clk := bypassing(t, ckptGrant("1", "a", 600), ckptGrant("2", "c", 7200))
	f.ckpt(10, "a", "a1", 16*mib, 1)
	f.ckpt(11, "c", "cold", 0, 1)
	tick(t, m)
	f.state.JobWritten = 36 * mib // 36 + 16 > 40
	tick(t, m)
	cdir, adir := f.dirs["c"], f.dirs["a"]
	// both applications' newest versions fit the buffer: no bypass,
	// however much the period has written
	if got := m.Hint(11, cdir, "cold"); got != "" {
		t.Fatalf("the colder of two checkpoints that both fit: hint %q", got)
	}
	// a third application, likelier to restart: the buffer keeps a's
	// and b's newest versions, c's go to the PFS
	f.grants = append(f.grants, ckptGrant("3", "b", 1200))
	f.ckpt(14, "b", "b1", 0, 2)
	f.ckpt(15, "c", "cold2", 0, 2)
	tick(t, m)
	if got := m.Hint(15, cdir, "cold2"); got != "pfs" {
		t.Fatalf("the coldest application's checkpoint, outside the hot set: hint %q, want pfs", got)
	}
	if got := m.Hint(15, cdir, "cold2"); got != "pfs" {
		t.Fatalf("a second chunk of the file: hint %q, want the same pfs", got)
	}
	if got := m.Hint(12, adir, "a2"); got != "" {
		t.Fatalf("a's new version (in the hot set): hint %q", got)
	}
	if got := m.Hint(14, f.dirs["b"], "b1"); got != "" {
		t.Fatalf("b's version (in the hot set): hint %q", got)
	}
	if got := m.Hint(13, 4242, "x"); got != "" {
		t.Fatalf("a file outside every checkpoint sequence: hint %q", got)
	}
	if m.Status().Totals.BypassedFiles != 1 || !m.Managed(15) {
		t.Fatalf("bypass not counted: %+v", m.Status().Totals)
	}
	mf := newManager(f, pol.FIFO, clk)
	tick(t, mf)
	tick(t, mf)
	if got := mf.Hint(16, cdir, "cold3"); got != "" {
		t.Fatalf("fifo bypasses: %q", got)
	}
}

// threeApps is bypassing with three applications of 16 MiB checkpoints
// through the 40 MiB buffer, a likeliest to restart, c the least, each
// with its first checkpoint begun (inodes 10, 11, 12), after a tick.
func threeApps(t *testing.T) (*fakeNS, *Manager, *clock) {
	t.Helper()
	f, m, clk := bypassing(t, ckptGrant("1", "a", 600), ckptGrant("2", "b", 1200), ckptGrant("3", "c", 7200))
	f.ckpt(10, "a", "a1", 0, 1)
	f.ckpt(11, "b", "b1", 0, 1)
	f.ckpt(12, "c", "c1", 0, 1)
	tick(t, m)
	return f, m, clk
}

// TestBypassEveryPeriod: a period whose bypassed checkpoint kept the
// buffer's share within S is followed by one that bypasses from its start
// too: the period's load counts the bypassed checkpoints (pol.PeriodLoad),
// not the buffer's writes alone, which would say the next period fits.
func TestBypassEveryPeriod(t *testing.T) {
	f, m, clk := threeApps(t)
	cdir := f.dirs["c"]
	if got := m.Hint(12, cdir, "c1"); got != "pfs" {
		t.Fatalf("period 1, declared 48 MiB through 40: c's checkpoint hint %q, want pfs", got)
	}
	for _, ino := range []uint64{10, 11} {
		if got := m.Hint(ino, f.dirs[f.files[ino].name[:1]], f.files[ino].name); got != "" {
			t.Fatalf("period 1: %s hint %q", f.files[ino].name, got)
		}
	}
	f.state.JobWritten = 32 * mib // a's and b's on the buffer
	f.state.LastJobWrite = clk.t.UnixNano()
	tick(t, m)
	clk.t = clk.t.Add(100 * time.Second)
	tick(t, m)
	st := m.Status().Pools[0]
	if !slices.Equal(st.History, []uint64{32 * mib}) || !slices.Equal(st.Loads, []uint64{48 * mib}) {
		t.Fatalf("after period 1: history %v, loads %v; want [32 MiB], [48 MiB]", st.History, st.Loads)
	}
	f.ckpt(13, "c", "c2", 0, 2)
	if got := m.Hint(13, cdir, "c2"); got != "pfs" {
		t.Fatalf("period 2, its first checkpoint: c's hint %q, want pfs (the last period wrote 48 MiB, 16 of them bypassed)", got)
	}
	if st := m.Status().Pools[0]; st.Bypassed != 16*mib {
		t.Errorf("period 2 bypassed %d bytes, want 16 MiB", st.Bypassed)
	}
}

// TestBypassRollsThePeriod: a checkpoint that begins past its period's
// end, before a tick has rolled the period, is judged in the period it
// begins in: the last period's load says it bypasses, where the old
// period, over, would have said it cannot end in time.
func TestBypassRollsThePeriod(t *testing.T) {
	f, m, clk := threeApps(t)
	if got := m.Hint(12, f.dirs["c"], "c1"); got != "pfs" {
		t.Fatalf("period 1: c's checkpoint hint %q, want pfs", got)
	}
	f.state.JobWritten = 32 * mib // a's and b's on the buffer
	f.state.LastJobWrite = clk.t.UnixNano()
	tick(t, m)
	clk.t = clk.t.Add(100*time.Second + time.Millisecond) // no tick since
	f.ckpt(13, "c", "c2", 0, 2)
	if got := m.Hint(13, f.dirs["c"], "c2"); got != "pfs" {
		t.Fatalf("period 2's first checkpoint before a tick: hint %q, want pfs", got)
	}
	st := m.Status().Pools[0]
	if st.Ticked != 100*time.Second+time.Millisecond {
		t.Errorf("the last tick %v ago, want 100.001s", st.Ticked)
	}
	if st.Elapsed != time.Millisecond || !slices.Equal(st.Loads, []uint64{48 * mib}) || st.Bypassed != 16*mib {
		t.Fatalf("after the hint: %v into the period, loads %v, %d bypassed; want 1ms, [48 MiB], 16 MiB", st.Elapsed, st.Loads, st.Bypassed)
	}
	tick(t, m)
	if st := m.Status().Pools[0]; len(st.Loads) != 1 {
		t.Fatalf("the tick rolled the period again: loads %v", st.Loads)
	}
}

// TestHintDuringScan: a checkpoint whose first chunk is placed while a
// scan lists the directories, after its own was listed, keeps its hint
// through the scan's end: it stays the manager's, and a bypassed one
// stays bypassed, counted once, holding the PFS. (Until 2026-12-05 the
// scan dropped every hint of a file it had not listed.)
func TestHintDuringScan(t *testing.T) {
	f, m, _ := threeApps(t)
	cdir := f.dirs["c"]
	f.listedDir = cdir
	f.listed = func() {
		f.ckpt(13, "c", "c2", 0, 2)
		f.mu.Lock()
		f.files[13].open = true // being written
		f.mu.Unlock()
		if got := m.Hint(13, cdir, "c2"); got != "pfs" {
			t.Errorf("c's second checkpoint: hint %q, want pfs", got)
		}
	}
	tick(t, m)
	if !m.Managed(13) {
		t.Fatal("a checkpoint hinted during the scan is not the manager's after it")
	}
	if got := m.Hint(13, cdir, "c2"); got != "pfs" {
		t.Fatalf("its next chunk: hint %q, want the same pfs", got)
	}
	st := m.Status()
	if st.Totals.BypassedFiles != 1 {
		t.Fatalf("%d files bypassed, want 1", st.Totals.BypassedFiles)
	}
	m.mu.Lock()
	_, holds := m.pools["mem"].bypassing[13]
	m.mu.Unlock()
	if !holds {
		t.Fatal("the bypassed checkpoint no longer counts at the PFS")
	}
	tick(t, m) // listed now: seen by the scan
	if !m.Managed(13) {
		t.Fatal("not the manager's once listed")
	}
	delete(f.files, 13) // removed: the next scan forgets it
	tick(t, m)
	if m.Managed(13) {
		t.Fatal("a removed checkpoint is still the manager's")
	}
}

// TestManagedFromFirstChunk: a checkpoint of a granted sequence is the
// manager's (the tiering manager leaves it alone) from the placement of
// its first chunk, under every policy, before a scan has seen it; a file
// outside every sequence is not.
func TestManagedFromFirstChunk(t *testing.T) {
	for _, p := range []pol.Policy{pol.LRU, pol.FIFO, pol.BBOS} {
		f := newFake(64 * mib)
		f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/a/*"}}
		f.ckpt(10, "a", "a1", 8*mib, 1)
		m := newManager(f, p, &clock{time.Unix(1000, 0)})
		tick(t, m)
		if m.Managed(11) {
			t.Fatalf("%s: a file placement has not asked about is managed", p)
		}
		if got := m.Hint(11, f.dirs["a"], "a2"); got != "" {
			t.Fatalf("%s: hint %q", p, got)
		}
		if !m.Managed(11) {
			t.Fatalf("%s: a checkpoint whose first chunk was placed is not managed before a scan sees it", p)
		}
		m.Hint(12, 4242, "x")
		if m.Managed(12) {
			t.Fatalf("%s: a file outside every sequence is managed", p)
		}
	}
}

// TestBusyDemotionWaitsForTick: a demotion that fails because the file is
// migrating already is tried again at the next tick, not at once: kicked
// on its failure, the manager would pick the same coldest file and fail
// again, round and round (it did: 40,000 tries in 4 s on bench/bbos). It
// is not a failing demotion either: writers still wait for room.
func TestBusyDemotionWaitsForTick(t *testing.T) {
	f := newFake(64 * mib)
	f.grants = []api.Grant{{Job: "1", Pool: "mem", Size: 8 * mib, Period: 100, Checkpoint: "/a/*"}}
	f.ckpt(10, "a", "a1", 8*mib, 1)
	f.busyIno = 10
	m := newManager(f, pol.LRU, &clock{time.Unix(1000, 0)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan time.Time)
	go m.Run(ctx, ticks)
	ticks <- time.Time{}
	ticks <- time.Time{} // the first tick has ended
	time.Sleep(50 * time.Millisecond)
	if n := strings.Count(f.movesSoFar(), "demote a1"); n < 1 || n > 2 {
		t.Fatalf("demotions of a busy file after two ticks: %d, want one a tick", n)
	}
	m.mu.Lock()
	failed := m.pools["mem"].demoteFailed
	m.mu.Unlock()
	if failed {
		t.Fatal("a file migrating already counts as a failing demotion")
	}
	f.mu.Lock()
	f.busyIno = 0
	f.mu.Unlock()
	ticks <- time.Time{}
	deadline := time.Now().Add(5 * time.Second)
	for m.Status().Totals.DemotedFiles != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not demoted once the file is free: %q", f.movesSoFar())
		}
		time.Sleep(time.Millisecond)
	}
}
