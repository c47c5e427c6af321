package beacon

import "github.com/sluice-hpc/sluice/internal/wire"

// The codecs of the types Beacon's service answers with
// (beacon/beaconrpc; docs/protocol.md).

// Fields implements wire.Message.
func (p *Profile) Fields(c *wire.Codec) {
	c.String(1, &p.Key)
	c.String(2, &p.Source)
	c.Int(3, &p.Runs)
	c.Int64(4, &p.Updated)
	c.Uint64(5, &p.Volume)
	c.Uint64(6, &p.ReadBytes)
	c.Uint64(7, &p.WriteBytes)
	c.Int(8, &p.IONodes)
	c.Int(9, &p.IORanks)
	c.Float64(10, &p.NodeBW)
	c.Float64(11, &p.RunBW)
	c.Int(12, &p.RunFwds)
	c.String(13, &p.Mode)
	c.Strings(14, &p.Classes)
	c.Uint64(15, &p.MetaOps)
	c.Float64(16, &p.MetaRate)
	c.Uint64(17, &p.MeanRequest)
	wire.List(c, 18, &p.Sizes)
	c.Uint64s(19, &p.Inputs)
	c.Int(20, &p.InputRuns)
	c.Uint64(21, &p.CkptBytes)
	c.Float64(22, &p.CkptPeriod)
}

// Fields implements wire.Message.
func (b *SizeBin) Fields(c *wire.Codec) {
	c.Uint64(1, &b.Size)
	c.Uint64(2, &b.Ops)
}

// Fields implements wire.Message.
func (j *JobInfo) Fields(c *wire.Codec) {
	c.String(1, &j.Job)
	c.String(2, &j.App)
	c.Uint32(3, &j.Uid)
	c.Int64(4, &j.First)
	c.Int64(5, &j.Last)
	c.Uint64(6, &j.Ops)
	c.Uint64(7, &j.Bytes)
	c.Int64(8, &j.Profiled)
}

// Fields implements wire.Message.
func (s *SlowServer) Fields(c *wire.Codec) {
	c.String(1, &s.Server)
	c.Uint8(2, (*uint8)(&s.Layer))
	c.Float64(3, &s.Ratio)
	c.Int(4, &s.Windows)
	c.Int64(5, &s.Since)
}

// Fields implements wire.Message.
func (i *Interference) Fields(c *wire.Codec) {
	c.String(1, &i.Server)
	c.String(2, &i.Victim)
	c.String(3, &i.Aggressor)
	c.Float64(4, &i.Inflation)
	c.Int(5, &i.Shared)
	c.Int(6, &i.Alone)
	c.Duration(7, &i.LatShared)
	c.Duration(8, &i.LatAlone)
}
