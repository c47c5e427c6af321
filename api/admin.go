package api

import (
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// Operation numbers of the administration service.
const (
	// daemons
	OpServers  wire.Op = 200 + iota // the registered daemons
	OpRegister                      // a daemon registers or heartbeats
	OpFault                         // inject a fault into a daemon
	OpBudget                        // a mem data server lends memory to its node or takes it back
	// resource pools (meta)
	OpPoolCreate
	OpPoolRemove
	OpPoolBind
	OpPoolUnbind
	OpPoolList
	// QoS rules (meta), and a daemon's flows
	OpQoSAdd
	OpQoSRemove
	OpQoSList
	OpQoSWatch
	OpQoSStats
	// the burst buffer: grants (meta), the manager's state, a buffer server's controls
	OpBBGrant
	OpBBRelease
	OpBBPools
	OpBBStatus
	OpBBServer
	// tiering (the tiering manager)
	OpMigrate
	OpTierStatus
	OpPrefetch
	OpTierSet
	OpTierGet
	OpFileMigration
	// the managers: where each runs (2.5)
	OpManagers
)

// The operations, typed.
var (
	Servers  = wire.Define[wire.Empty, ServersRep](OpServers, "servers", wire.Admin)
	Register = wire.Define[wire.ServerInfo, RegisterRep](OpRegister, "register", wire.Admin)
	Fault    = wire.Define[FaultReq, wire.Empty](OpFault, "fault", wire.Admin)
	Budget   = wire.Define[BudgetReq, BudgetRep](OpBudget, "budget", wire.Admin)

	PoolCreate = wire.Define[Pool, PoolList](OpPoolCreate, "pool-create", wire.Admin)
	PoolRemove = wire.Define[PoolRef, PoolList](OpPoolRemove, "pool-rm", wire.Admin)
	PoolBind   = wire.Define[PoolBinding, PoolList](OpPoolBind, "pool-bind", wire.Admin)
	PoolUnbind = wire.Define[PoolBinding, PoolList](OpPoolUnbind, "pool-unbind", wire.Admin)
	PoolLs     = wire.Define[wire.Empty, PoolList](OpPoolList, "pool-list", wire.Admin)

	QoSAdd    = wire.Define[QoSAddReq, qos.RuleSet](OpQoSAdd, "qos-add", wire.Admin)
	QoSRemove = wire.Define[RuleRef, qos.RuleSet](OpQoSRemove, "qos-rm", wire.Admin)
	QoSList   = wire.Define[wire.Empty, qos.RuleSet](OpQoSList, "qos-list", wire.Admin)
	QoSWatch  = wire.Define[QoSWatchReq, qos.RuleSet](OpQoSWatch, "qos-watch", wire.Admin)
	QoSStats  = wire.Define[wire.Empty, QoSStatsRep](OpQoSStats, "qos-stats", wire.Admin)

	BBGrantOp = wire.Define[Grant, Admission](OpBBGrant, "bb-grant", wire.Admin)
	BBRelease = wire.Define[JobRef, wire.Empty](OpBBRelease, "bb-release", wire.Admin)
	BBPoolsOp = wire.Define[wire.Empty, BBPools](OpBBPools, "bb-pools", wire.Admin)
	BBStatus  = wire.Define[wire.Empty, BBState](OpBBStatus, "bb-status", wire.Admin)
	BBServer  = wire.Define[BBServerReq, BBServerState](OpBBServer, "bb-server", wire.Admin)

	Migrate       = wire.Define[MigrateReq, MigrateRep](OpMigrate, "migrate", wire.Admin)
	TierStatus    = wire.Define[wire.Empty, TierState](OpTierStatus, "tier-status", wire.Admin)
	Prefetch      = wire.Define[PrefetchReq, wire.Empty](OpPrefetch, "prefetch", wire.Admin)
	TierSet       = wire.Define[TierSetReq, wire.Empty](OpTierSet, "tier-set", wire.Admin)
	TierGet       = wire.Define[FileRef, PolicyView](OpTierGet, "tier-get", wire.Admin)
	FileMigration = wire.Define[FileRef, FileMigrationState](OpFileMigration, "file-migration", wire.Admin)

	Managers = wire.Define[wire.Empty, ManagersRep](OpManagers, "managers", wire.Admin)
)

// JobRef names a job.
type JobRef struct{ Job string }

// Fields implements wire.Message.
func (r *JobRef) Fields(c *wire.Codec) { c.String(1, &r.Job) }

// FileRef names a file or directory by inode.
type FileRef struct{ Ino uint64 }

// Fields implements wire.Message.
func (r *FileRef) Fields(c *wire.Codec) { c.Uint64(1, &r.Ino) }
