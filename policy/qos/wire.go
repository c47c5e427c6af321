package qos

import "github.com/sluice-hpc/sluice/internal/wire"

// The codecs of the rules and statistics the administration service
// carries (api; docs/protocol.md).

// Fields implements wire.Message.
func (r *Rule) Fields(c *wire.Codec) {
	c.String(1, &r.Name)
	c.String(2, &r.Job)
	c.String(3, &r.Node)
	c.String(4, &r.App)
	c.Int64(5, &r.Uid)
	c.Int64(6, &r.Gid)
	c.Uint8(7, (*uint8)(&r.Op))
	c.Float64(8, &r.Rate)
	c.Float64(9, &r.Ops)
	c.Float64(10, &r.Share)
}

// Fields implements wire.Message.
func (s *RuleSet) Fields(c *wire.Codec) {
	c.Uint64(1, &s.Version)
	wire.List(c, 2, &s.Rules)
}

// Fields implements wire.Message.
func (g *GateStats) Fields(c *wire.Codec) {
	c.String(1, &g.Role)
	c.String(2, &g.Class)
	c.Uint64(3, &g.Version)
	wire.List(c, 4, &g.Flows)
}

// Fields implements wire.Message.
func (f *FlowStats) Fields(c *wire.Codec) {
	c.String(1, &f.Key)
	c.String(2, &f.Rule)
	c.Float64(3, &f.Rate)
	c.Float64(4, &f.Ops)
	c.Float64(5, &f.Share)
	c.Float64(6, &f.Granted)
	c.Float64(7, &f.Used)
	c.Float64(8, &f.UsedOps)
	c.Uint64(9, &f.Bytes)
	c.Uint64(10, &f.N)
	c.Int(11, &f.Depth)
	c.Duration(12, &f.Wait)
	c.Uint64(13, &f.Capped)
}
