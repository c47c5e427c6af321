// Package engine owns the storage-engine abstraction under the metadata
// service: an ordered key-value store with atomic batches, and the registry
// that chooses an engine by name. It knows nothing of inodes or directories;
// package meta builds the namespace on top. Engines register themselves from
// init functions of their own files.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ErrNotFound is returned by Get for a missing key.
var ErrNotFound = errors.New("engine: key not found")

// Engine is an ordered key-value store.
type Engine interface {
	// Get returns a copy of the value stored at key.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key with the prefix, at or after start, in
	// key order, until fn returns false. Keys and values passed to fn are
	// only valid during the call. fn may call the engine (Get, Apply):
	// no lock is held while it runs, and entries applied meanwhile may or
	// may not be seen (TestConformance's reentrant case).
	Scan(prefix, start []byte, fn func(k, v []byte) bool) error
	// Apply commits the batch atomically. With sync the batch is durable on
	// the medium when Apply returns; without, it survives a crash of the
	// process but perhaps not of the machine.
	Apply(b *Batch, sync bool) error
	// Sync makes every applied batch durable on the medium.
	Sync() error
	Close() error
}

// Batch is an ordered list of writes applied atomically.
type Batch struct {
	Ops []Op
}

// Op is one write of a batch. A nil Value deletes the key.
type Op struct {
	Key, Value []byte
	Delete     bool
}

// Set adds a write of key.
func (b *Batch) Set(key, value []byte) {
	b.Ops = append(b.Ops, Op{Key: key, Value: value})
}

// Del adds a deletion of key.
func (b *Batch) Del(key []byte) {
	b.Ops = append(b.Ops, Op{Key: key, Delete: true})
}

// Len returns the number of writes.
func (b *Batch) Len() int { return len(b.Ops) }

// Target is where an engine keeps its data: a directory for the embedded
// engines ("" for engines without files), an address for the engines
// served by other processes (etcd: "host:port,host:port/prefix").
type Target struct {
	Dir  string
	Addr string
}

// Opener opens an engine at a target.
type Opener func(t Target) (Engine, error)

// entry is a registered engine.
type entry struct {
	open Opener
	// remote engines keep their data in servers of their own, reached at
	// Target.Addr
	remote bool
}

var (
	regMu    sync.Mutex // guards registry
	registry = map[string]entry{}
)

// Register makes an engine that keeps its data in a directory available
// by name. It panics on a duplicate, which is a programming error.
func Register(name string, open Opener) { register(name, entry{open: open}) }

// RegisterRemote makes an engine served by servers of its own available
// by name; it is opened by URI, NAME://ADDRESS.
func RegisterRemote(name string, open Opener) { register(name, entry{open: open, remote: true}) }

func register(name string, e entry) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("engine: duplicate registration of " + name)
	}
	registry[name] = e
}

// Remote says whether engine name is served by servers of its own.
func Remote(name string) bool {
	regMu.Lock()
	defer regMu.Unlock()
	return registry[name].remote
}

// Open opens engine spec with its files in dir: spec is an engine's name
// ("pebble") or, for a remote engine, a URI naming it by scheme and
// giving its address ("etcd://10.0.0.1:2379,10.0.0.2:2379/sluice").
func Open(spec, dir string) (Engine, error) {
	name, addr, _ := strings.Cut(spec, "://")
	regMu.Lock()
	e, ok := registry[name]
	regMu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("unknown metadata engine %q (have %v)", name, Names())
	case e.remote && addr == "":
		return nil, fmt.Errorf("metadata engine %s: give its address, %s://HOST:PORT,...[/PREFIX]", name, name)
	case !e.remote && addr != "":
		return nil, fmt.Errorf("metadata engine %s keeps its files in the state directory: no address", name)
	}
	return e.open(Target{Dir: dir, Addr: addr})
}

// Names lists the registered engines.
func Names() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var n []string
	for k := range registry {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Elector is an engine several metadata servers share, one of them
// active at a time (etcd). Campaign blocks while another server is
// active; once this one is, it fences the engine, so that no batch
// commits after this server's term ends (its lease lost: killed, stalled
// or cut off past the lease), and reloads whatever the engine caches. The
// channel it returns is closed when the term ends: the server must stop
// serving then. Close ends the term at once (a standby takes over
// without waiting for the lease).
type Elector interface {
	Campaign(ctx context.Context, id string) (ended <-chan struct{}, err error)
	// Active is the id of the active server ("" if none).
	Active(ctx context.Context) (string, error)
	// Holds says whether this server's term is on as far as its own clock
	// can tell: its lease renewed recently enough that it cannot have run
	// out. A server stopped past its lease knows at once when it runs
	// again, before etcd's answer says so; it must then not act on
	// anything outside the engine (data servers).
	Holds() bool
}

// Shared is an engine that the cluster's other roles keep keys of their
// own on, apart from the metadata service's, each role with an election
// of its own (etcd): the managers that run in processes of their own
// (OpenRole). ActiveOf is the id of role's active holder ("" if none).
type Shared interface {
	ActiveOf(ctx context.Context, role string) (string, error)
}

// OpenRole opens the keys and the election of role (a manager run in a
// process of its own) on the shared engine spec names, apart from the
// metadata service's keys: etcd's PREFIX.ROLE/ and PREFIX.ROLE.active/.
func OpenRole(spec, role string) (Engine, error) {
	name, addr, _ := strings.Cut(spec, "://")
	if name != "etcd" {
		return nil, fmt.Errorf("metadata engine %q lives in the metadata daemon's process: a %s manager of its own needs a shared engine (etcd://…)", spec, role)
	}
	c, err := ParseEtcd(addr)
	if err != nil {
		return nil, err
	}
	c.Prefix += "." + role
	return OpenEtcd(c)
}

// Maintainer is an engine whose storage needs looking after from time to
// time (etcd: defragmentation, which gives space that compaction freed
// back to the file system, one member at a time). The active metadata
// server calls Maintain now and then.
type Maintainer interface {
	Maintain(ctx context.Context) (Maintenance, error)
}

// Maintenance is what one Maintain did.
type Maintenance struct {
	Defragmented []string // the members defragmented
	Freed        int64    // bytes their backends shrank by
}

// ErrFenced is Apply's error once the server's term has ended: another
// metadata server is, or may be, active, and the batch was not applied.
var ErrFenced = errors.New("fenced: this metadata server's term ended (another is active); nothing was applied")

// Limited is an engine that refuses batches beyond a size (etcd: its
// servers' --max-txn-ops and --max-request-bytes).
type Limited interface {
	// BatchLimits are the most writes, and bytes, one batch may hold.
	BatchLimits() (ops, bytes int)
}

// Parts splits b into batches within e's limits, in order (one batch, b
// itself, for an engine without limits). Each part is applied on its
// own: only for batches whose writes may land a part at a time, such as
// deletions of what nothing refers to any more, with the write that
// records the end last.
func Parts(e Engine, b *Batch) []*Batch {
	l, ok := e.(Limited)
	if !ok {
		return []*Batch{b}
	}
	maxOps, maxBytes := l.BatchLimits()
	var out []*Batch
	cur, size := &Batch{}, 0
	for _, op := range b.Ops {
		n := len(op.Key) + len(op.Value) + 64 // the engine's own key prefix and framing
		if len(cur.Ops) > 0 && (len(cur.Ops)+1 > maxOps || size+n > maxBytes) {
			out = append(out, cur)
			cur, size = &Batch{}, 0
		}
		cur.Ops = append(cur.Ops, op)
		size += n
	}
	return append(out, cur)
}
