package api

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// Grant is one job's claim on a burst-buffer pool (`sluice bb setup`,
// docs/bbos.md).
type Grant struct {
	Job    string
	Pool   string  // the tier: mem or ssd
	Size   uint64  // bytes per I/O phase (the directive's capacity)
	Period float64 `json:",omitempty"` // seconds between its I/O phases (0: unknown)
	UID    uint32
	Since  int64 // unix ns
	// App names the job's application (`app=`; "": the job alone).
	App string `json:",omitempty"`
	// Checkpoint is the glob of the job's checkpoint files, a path in the
	// namespace whose last element may hold wildcards (`checkpoint=`; the
	// job's buffer directory's files by default): its versions, in the
	// order they were created, for cold-data selection (manager/bbos).
	Checkpoint string `json:",omitempty"`
	// MTBF is the application's mean time between failures in seconds
	// (`mtbf=`; 0: the manager's default): a low MTBF means a restart,
	// which reads the newest version, is likely soon.
	MTBF float64 `json:",omitempty"`
}

// Fields implements wire.Message.
func (g *Grant) Fields(c *wire.Codec) {
	c.String(1, &g.Job)
	c.String(2, &g.Pool)
	c.Uint64(3, &g.Size)
	c.Float64(4, &g.Period)
	c.Uint32(5, &g.UID)
	c.Int64(6, &g.Since)
	c.String(7, &g.App)
	c.String(8, &g.Checkpoint)
	c.Float64(9, &g.MTBF)
}

// Admission is the policy's answer to a grant (policy/bbos.Admission):
// granted or not, the load the buffer would carry with it and the limit
// the policy allows (bytes), the buffer's planning period (seconds), why.
type Admission struct {
	OK          bool
	Load, Limit float64
	Period      float64
	Reason      string
}

// Fields implements wire.Message.
func (a *Admission) Fields(c *wire.Codec) {
	c.Bool(1, &a.OK)
	c.Float64(2, &a.Load)
	c.Float64(3, &a.Limit)
	c.Float64(4, &a.Period)
	c.String(5, &a.Reason)
}

// BBPool is a pool as grants see it.
type BBPool struct {
	Pool     string
	Capacity uint64 // the live data servers' capacity
	// Limit is the most the policy admits per period (bbos.Limit over the
	// grants' longest period: Capacity for dedicated; capped at 64×).
	Limit   uint64
	Granted uint64 // the grants' sizes, summed
	Policy  string
}

// Fields implements wire.Message.
func (p *BBPool) Fields(c *wire.Codec) {
	c.String(1, &p.Pool)
	c.Uint64(2, &p.Capacity)
	c.Uint64(3, &p.Limit)
	c.Uint64(4, &p.Granted)
	c.String(5, &p.Policy)
}

// BBPools is the pools and the grants on them.
type BBPools struct {
	Pools  []BBPool
	Grants []Grant
}

// Fields implements wire.Message.
func (r *BBPools) Fields(c *wire.Codec) {
	wire.List(c, 1, &r.Pools)
	wire.List(c, 2, &r.Grants)
}

// BBState is the burst-buffer manager's state (`sluice bb status`).
type BBState struct {
	Policy     string
	Bypass     bool
	NoVersions bool
	Pools      []BBPoolState
	Totals     BBTotals
	Versions   []BBVersion
}

// Fields implements wire.Message.
func (s *BBState) Fields(c *wire.Codec) {
	c.String(1, &s.Policy)
	c.Bool(2, &s.Bypass)
	c.Bool(3, &s.NoVersions)
	wire.List(c, 4, &s.Pools)
	wire.Embed(c, 5, &s.Totals)
	wire.List(c, 6, &s.Versions)
}

// BBPoolState is one pool's period and plan now.
type BBPoolState struct {
	Pool                 string
	Servers              int
	Capacity, Free       uint64
	Period, Elapsed      time.Duration
	DWSF, DWPP, Declared uint64
	History              []uint64 // DWPP measured in past periods
	Loads                []uint64 // past periods' checkpoint bytes, bypassed ones included
	Bypassed             uint64   // checkpoints sent straight to the PFS this period, their grants' sizes
	Pattern              string
	Start, Full          uint64  // DWSF at which demotion starts and reaches full speed while writing
	Write, Demote        float64 // bytes/s now
	Writing              bool
	Demoting             int
	// the servers' I/O scheduler, summed
	Phases, Preempted, Waited uint64
	WaitedTotal               time.Duration
	// Ticked is how long ago the manager's last tick began: with
	// Elapsed, where its ticker stands against the period (a replay of
	// the run in the simulator takes it, bb.Config (sim/bb).Ticks)
	Ticked time.Duration
}

// Fields implements wire.Message.
func (p *BBPoolState) Fields(c *wire.Codec) {
	c.String(1, &p.Pool)
	c.Int(2, &p.Servers)
	c.Uint64(3, &p.Capacity)
	c.Uint64(4, &p.Free)
	c.Duration(5, &p.Period)
	c.Duration(6, &p.Elapsed)
	c.Uint64(7, &p.DWSF)
	c.Uint64(8, &p.DWPP)
	c.Uint64(9, &p.Declared)
	c.Uint64s(10, &p.History)
	c.Uint64s(11, &p.Loads)
	c.Uint64(12, &p.Bypassed)
	c.String(13, &p.Pattern)
	c.Uint64(14, &p.Start)
	c.Uint64(15, &p.Full)
	c.Float64(16, &p.Write)
	c.Float64(17, &p.Demote)
	c.Bool(18, &p.Writing)
	c.Int(19, &p.Demoting)
	c.Uint64(20, &p.Phases)
	c.Uint64(21, &p.Preempted)
	c.Uint64(22, &p.Waited)
	c.Duration(23, &p.WaitedTotal)
	c.Duration(24, &p.Ticked)
}

// BBTotals counts what the burst-buffer manager did.
type BBTotals struct {
	Demoted, DemotedFiles   uint64 // bytes and files copied to the PFS
	Evicted, EvictedFiles   uint64 // bytes and files of buffer copies dropped
	Bypassed, BypassedFiles uint64 // checkpoints sent to the PFS on arrival
	Failed                  uint64 // demotions and evictions that failed
}

// Fields implements wire.Message.
func (t *BBTotals) Fields(c *wire.Codec) {
	c.Uint64(1, &t.Demoted)
	c.Uint64(2, &t.DemotedFiles)
	c.Uint64(3, &t.Evicted)
	c.Uint64(4, &t.EvictedFiles)
	c.Uint64(5, &t.Bypassed)
	c.Uint64(6, &t.BypassedFiles)
	c.Uint64(7, &t.Failed)
}

// BBVersion is one checkpoint file.
type BBVersion struct {
	Ino      uint64
	Name     string
	Job      string // the grant's job
	Sequence string // the checkpoint glob
	Seq      int
	Bytes    uint64
	MTBF     float64
	OnBuffer bool
	Demoted  bool
	Open     bool
	Bypassed bool
	// Chunks are its chunks with data, Buffered those on the buffer: a
	// restart reads it from the buffer when they are equal
	Chunks, Buffered int
}

// Fields implements wire.Message.
func (v *BBVersion) Fields(c *wire.Codec) {
	c.Uint64(1, &v.Ino)
	c.String(2, &v.Name)
	c.String(3, &v.Job)
	c.String(4, &v.Sequence)
	c.Int(5, &v.Seq)
	c.Uint64(6, &v.Bytes)
	c.Float64(7, &v.MTBF)
	c.Bool(8, &v.OnBuffer)
	c.Bool(9, &v.Demoted)
	c.Bool(10, &v.Open)
	c.Bool(11, &v.Bypassed)
	c.Int(12, &v.Chunks)
	c.Int(13, &v.Buffered)
}

// BBControl is what the burst-buffer manager (manager/bbos) sets on a data
// server of its pool, from the BBOS period plan: the checkpoint write cap
// and the demotion read cap of its token buckets, and the I/O scheduler
// (internal/iosched).
type BBControl struct {
	// WriteCap caps the writes of jobs (checkpoints), DemoteCap the
	// reads of migrations (demotion to the PFS) while jobs write, and
	// IdleDemoteCap while none does, in bytes/s; 0: no cap.
	WriteCap, DemoteCap, IdleDemoteCap float64
	// DemoteHold: migrations' reads wait while jobs write (demotion
	// only while the server is idle).
	DemoteHold bool
	// Sched turns the I/O scheduler on: one queue per job, the I/O
	// phases of different jobs do not overlap on the server. Gap ends a
	// phase, MaxWait bounds a wait (0: the server's defaults).
	Sched        bool
	Gap, MaxWait time.Duration
	// Idle is how long after its jobs' last write the server is idle
	// (0: the server's default, 20 ms).
	Idle time.Duration
}

// Fields implements wire.Message.
func (b *BBControl) Fields(c *wire.Codec) {
	c.Float64(1, &b.WriteCap)
	c.Float64(2, &b.DemoteCap)
	c.Float64(3, &b.IdleDemoteCap)
	c.Bool(4, &b.DemoteHold)
	c.Bool(5, &b.Sched)
	c.Duration(6, &b.Gap)
	c.Duration(7, &b.MaxWait)
	c.Duration(8, &b.Idle)
}

// BBServerReq sets a buffer server's controls (nil: leaves them as they
// are) and asks for its state.
type BBServerReq struct{ Set *BBControl }

// Fields implements wire.Message.
func (r *BBServerReq) Fields(c *wire.Codec) { wire.Opt(c, 1, &r.Set) }

// BBServerState is a data server's answer to BBServer: its controls and
// what its jobs wrote.
type BBServerState struct {
	BBControl
	// JobWritten counts the bytes of jobs' writes served since the server
	// started (migrations not counted); LastJobWrite is when the last one
	// ended (unix ns; 0: none yet).
	JobWritten   uint64
	LastJobWrite int64
	// Capacity and Used are the store's, now.
	Capacity, Used uint64
	// The scheduler's figures: phases begun and cut short, requests that
	// waited and their waits summed, the job whose phase runs.
	Phases, Preempted, Waited uint64
	WaitedTotal               time.Duration
	Active                    string
}

// Fields implements wire.Message.
func (s *BBServerState) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &s.BBControl)
	c.Uint64(2, &s.JobWritten)
	c.Int64(3, &s.LastJobWrite)
	c.Uint64(4, &s.Capacity)
	c.Uint64(5, &s.Used)
	c.Uint64(6, &s.Phases)
	c.Uint64(7, &s.Preempted)
	c.Uint64(8, &s.Waited)
	c.Duration(9, &s.WaitedTotal)
	c.String(10, &s.Active)
}
