package api

import "github.com/sluice-hpc/sluice/internal/wire"

// ServersRep lists the registered daemons.
type ServersRep struct{ Servers []wire.ServerInfo }

// Fields implements wire.Message.
func (r *ServersRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Servers) }

// ManagersRep says where each manager of the active metadata daemon
// runs: in its process, or apart (daemon/managerd) with the active
// instance its election names.
type ManagersRep struct{ Managers []ManagerInfo }

// Fields implements wire.Message.
func (r *ManagersRep) Fields(c *wire.Codec) { wire.List(c, 1, &r.Managers) }

// ManagerInfo is one manager: its role ("forwarding", "tiering", "burst
// buffer"), whether it runs apart, and the address of the instance that
// answers for it (the metadata daemon's own when not apart; "" when
// none is active: a takeover, or no manager daemon running); Error says
// why the active one could not be asked for.
type ManagerInfo struct {
	Role   string
	Apart  bool
	Active string
	Error  string
}

// Fields implements wire.Message.
func (m *ManagerInfo) Fields(c *wire.Codec) {
	c.String(1, &m.Role)
	c.Bool(2, &m.Apart)
	c.String(3, &m.Active)
	c.String(4, &m.Error)
}

// RegisterRep answers a registration or heartbeat (a wire.ServerInfo:
// ID 0 to be given one): the daemon's id, the version of the QoS rules in
// force (a daemon running an older one asks for them), and whether
// truncations it has not applied wait for it (a data server then asks
// for them).
type RegisterRep struct {
	ID         uint64
	QoSVersion uint64
	HasTrims   bool
}

// Fields implements wire.Message.
func (r *RegisterRep) Fields(c *wire.Codec) {
	c.Uint64(1, &r.ID)
	c.Uint64(2, &r.QoSVersion)
	c.Bool(3, &r.HasTrims)
}

// Fault kinds (FaultReq.Kind).
const (
	FaultSlow   = "slow"   // Value: the slowdown factor ×100 (100: healthy)
	FaultFill   = "fill"   // Value: the store's capacity, bytes (data servers)
	FaultStall  = "stall"  // Value: ms every request waits first
	FaultPause  = "pause"  // Point: arm a pause point (crash tests; data servers, the metadata service)
	FaultResume = "resume" // Point: release it
)

// FaultReq injects a fault into the daemon it is sent to.
type FaultReq struct {
	Kind  string
	Value uint64
	Point string
}

// Fields implements wire.Message.
func (r *FaultReq) Fields(c *wire.Codec) {
	c.String(1, &r.Kind)
	c.Uint64(2, &r.Value)
	c.String(3, &r.Point)
}

// BudgetReq sets a mem data server's budget to Size bytes (at most the
// configured one: the rest is lent to its node), or with Release gives
// the configured budget back.
type BudgetReq struct {
	Size    uint64
	Release bool
}

// Fields implements wire.Message.
func (r *BudgetReq) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Size)
	c.Bool(2, &r.Release)
}

// BudgetRep is the server's budget and use after the change.
type BudgetRep struct{ Capacity, Used uint64 }

// Fields implements wire.Message.
func (r *BudgetRep) Fields(c *wire.Codec) {
	c.Uint64(1, &r.Capacity)
	c.Uint64(2, &r.Used)
}
