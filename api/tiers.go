package api

import (
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// MigrateReq moves file Ino to tier Tier now (`sluice file migrate`); with
// Wait, the answer comes when it has moved.
type MigrateReq struct {
	Ino  uint64
	Tier string
	Wait bool
}

// Fields implements wire.Message.
func (r *MigrateReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	c.String(2, &r.Tier)
	c.Bool(3, &r.Wait)
}

// MigrateRep says how many chunks moved (with Wait).
type MigrateRep struct{ Chunks uint64 }

// Fields implements wire.Message.
func (r *MigrateRep) Fields(c *wire.Codec) { c.Uint64(1, &r.Chunks) }

// TierState is the tiering manager's latest decisions and totals.
type TierState struct {
	Servers  []TierServer
	Totals   TierTotals
	Prefetch []PrefetchState
}

// Fields implements wire.Message.
func (s *TierState) Fields(c *wire.Codec) {
	wire.List(c, 1, &s.Servers)
	wire.Embed(c, 2, &s.Totals)
	wire.List(c, 3, &s.Prefetch)
}

// TierServer is one server's latest decision.
type TierServer struct {
	ID                               uint64
	Mode                             string
	StallWrite, ForcedOut, NormalOut uint64
	Concurrency, InFlight            int
	Reason                           string
}

// Fields implements wire.Message.
func (s *TierServer) Fields(c *wire.Codec) {
	c.Uint64(1, &s.ID)
	c.String(2, &s.Mode)
	c.Uint64(3, &s.StallWrite)
	c.Uint64(4, &s.ForcedOut)
	c.Uint64(5, &s.NormalOut)
	c.Int(6, &s.Concurrency)
	c.Int(7, &s.InFlight)
	c.String(8, &s.Reason)
}

// TierTotals counts what the tiering manager moved.
type TierTotals struct {
	Files, Chunks, Failed uint64
	Bytes                 uint64
	Drained               uint64 // files moved to the PFS by drain policies
	// Replicated chunks copied again (ReplicaBytes in all), and copies
	// that failed
	Replicated, ReplicaBytes, ReplicaFailed uint64
}

// Fields implements wire.Message.
func (t *TierTotals) Fields(c *wire.Codec) {
	c.Uint64(1, &t.Files)
	c.Uint64(2, &t.Chunks)
	c.Uint64(3, &t.Failed)
	c.Uint64(4, &t.Bytes)
	c.Uint64(5, &t.Drained)
	c.Uint64(6, &t.Replicated)
	c.Uint64(7, &t.ReplicaBytes)
	c.Uint64(8, &t.ReplicaFailed)
}

// PrefetchState is one job's pre-migration of its inputs.
type PrefetchState struct {
	Job                    string
	Files                  int    // in the list
	Promoted, Read, Failed int    // files
	Dropped                int    // promoted but not read within PrefetchHold, or when the job ended
	PromotedBytes          uint64 // moved up
	InWindow               int    // promoted (or moving) and not read yet
	Done                   bool
	Started, Finished      time.Time
}

// Fields implements wire.Message.
func (p *PrefetchState) Fields(c *wire.Codec) {
	c.String(1, &p.Job)
	c.Int(2, &p.Files)
	c.Int(3, &p.Promoted)
	c.Int(4, &p.Read)
	c.Int(5, &p.Failed)
	c.Int(6, &p.Dropped)
	c.Uint64(7, &p.PromotedBytes)
	c.Int(8, &p.InWindow)
	c.Bool(9, &p.Done)
	c.Time(10, &p.Started)
	c.Time(11, &p.Finished)
}

// PrefetchReq promotes files Files to the mem tier ahead of job Job's
// reads (`sluice file prefetch`).
type PrefetchReq struct {
	Job   string
	Files []uint64
}

// Fields implements wire.Message.
func (r *PrefetchReq) Fields(c *wire.Codec) {
	c.String(1, &r.Job)
	c.Uint64s(2, &r.Files)
}

// TierPolicy is a directory's tiering policy (docs/tiering.md).
type TierPolicy struct {
	// Pin: files never move below this tier ("mem" or "ssd").
	Pin string
	// Drain says when files move down to the pfs tier: "now", "on-close"
	// (once closed), "cool" (closed and not reopened for the manager's
	// drain age) or "never".
	Drain string
	// KeepCache: a drained file's fast copy stays as a clean cache of its
	// copy on the PFS, dropped with nothing to copy when space is needed
	// (BBOS's deleters), instead of the drain moving the data.
	KeepCache bool `json:",omitempty"`
}

// Fields implements wire.Message.
func (p *TierPolicy) Fields(c *wire.Codec) {
	c.String(1, &p.Pin)
	c.String(2, &p.Drain)
	c.Bool(3, &p.KeepCache)
}

// TierSetReq sets directory Ino's policy.
type TierSetReq struct {
	Ino    uint64
	Policy TierPolicy
}

// Fields implements wire.Message.
func (r *TierSetReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Ino)
	wire.Embed(c, 2, &r.Policy)
}

// PolicyView is the policy a file or directory follows, the directory it
// comes from (From; 0: the default), and the manager's defaults.
type PolicyView struct {
	TierPolicy
	From         uint64
	DefaultDrain string
	DrainAge     time.Duration
}

// Fields implements wire.Message.
func (v *PolicyView) Fields(c *wire.Codec) {
	wire.Embed(c, 1, &v.TierPolicy)
	c.Uint64(2, &v.From)
	c.String(3, &v.DefaultDrain)
	c.Duration(4, &v.DrainAge)
}

// FileMigrationState is a file's migration state (`sluice file stat`).
type FileMigrationState struct {
	Migrating bool        // the manager is moving it now
	Chunks    []ChunkMove // chunk migrations not finished
}

// Fields implements wire.Message.
func (s *FileMigrationState) Fields(c *wire.Codec) {
	c.Bool(1, &s.Migrating)
	wire.List(c, 2, &s.Chunks)
}

// ChunkMove is one unfinished chunk migration.
type ChunkMove struct {
	Idx     uint64
	State   string // copying, committed (ends not yet delivered), aborted (same)
	From    string // tier
	To      string
	Servers []uint64 // the destination group
}

// Fields implements wire.Message.
func (m *ChunkMove) Fields(c *wire.Codec) {
	c.Uint64(1, &m.Idx)
	c.String(2, &m.State)
	c.String(3, &m.From)
	c.String(4, &m.To)
	c.Uint64s(5, &m.Servers)
}

// RootIno is the namespace's root directory.
const RootIno = 1

// FileUse is how much of one file one data server holds (what the
// tiering manager weighs on a server short of space).
type FileUse struct {
	Ino   uint64
	Bytes uint64
}

// Fields implements wire.Message.
func (u *FileUse) Fields(c *wire.Codec) {
	c.Uint64(1, &u.Ino)
	c.Uint64(2, &u.Bytes)
}

// ShortChunk is a chunk with fewer copies than its tier keeps (what the
// tiering manager's repair copies again).
type ShortChunk struct {
	Ino uint64
	Loc wire.ChunkLoc
	// Lost is a server of the chunk's groups that is down (0: none; the
	// chunk is short because it never had its second copy or lost it).
	Lost uint64
}

// Fields implements wire.Message.
func (c0 *ShortChunk) Fields(c *wire.Codec) {
	c.Uint64(1, &c0.Ino)
	wire.Embed(c, 2, &c0.Loc)
	c.Uint64(3, &c0.Lost)
}
