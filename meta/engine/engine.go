// Package engine owns the storage-engine abstraction under the metadata
// service: an ordered key-value store with atomic batches, and the registry
// that chooses an engine by name. It knows nothing of inodes or directories;
// package meta builds the namespace on top. Engines register themselves from
// init functions of their own files.
package engine

import (
	"errors"
	"fmt"
	"sort"
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

// Opener opens an engine whose files live in dir ("" for engines without
// files).
type Opener func(dir string) (Engine, error)

var (
	regMu    sync.Mutex // guards registry
	registry = map[string]Opener{}
)

// Register makes an engine available by name. It panics on a duplicate,
// which is a programming error.
func Register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("engine: duplicate registration of " + name)
	}
	registry[name] = open
}

// Open opens the named engine.
func Open(name, dir string) (Engine, error) {
	regMu.Lock()
	open, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown metadata engine %q (have %v)", name, Names())
	}
	return open(dir)
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
