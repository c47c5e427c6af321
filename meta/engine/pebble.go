package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble"
)

func init() {
	Register("pebble", func(t Target) (Engine, error) { return OpenPebble(t.Dir) })
}

// Pebble is the embedded persistent engine (an LSM tree with a write-ahead
// log). Concurrent synchronous commits share one WAL fsync (group commit),
// which is why it was chosen over bbolt; see docs/metadata.md. Unsynced
// commits go through an intent log first so they survive kill -9.
type Pebble struct {
	db *pebble.DB

	mu  sync.Mutex // guards log; orders log appends like engine commits
	log *intentLog
}

// pebbleCacheSize is the block cache. Pebble's memtables reserve their
// room in it (4 MiB each when full), so its default of 8 MiB left the
// service's point reads almost no cache: every Get read and decompressed
// its block again (23 % of the metadata daemon's CPU in a run of small
// files; BenchmarkSmallFileLife, docs/benchmarks.md).
const pebbleCacheSize = 64 << 20

// intentLogLimit: past this size the engine is synced and the log emptied.
const intentLogLimit = 16 << 20

var _ Engine = (*Pebble)(nil)

// OpenPebble opens or creates a Pebble store in dir.
func OpenPebble(dir string) (*Pebble, error) {
	cache := pebble.NewCache(pebbleCacheSize)
	defer cache.Unref() // the store holds its own reference
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}, Cache: cache})
	if err != nil {
		return nil, err
	}
	log, err := openIntentLog(filepath.Join(dir, "intent.log"))
	if err != nil {
		db.Close()
		return nil, err
	}
	p := &Pebble{db: db, log: log}
	// commits acknowledged before a crash may be only in the intent log
	err = log.replay(func(b *Batch) error { return p.commit(b, false) })
	if err == nil {
		err = p.syncLocked()
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return p, nil
}

// Get implements Engine.
func (p *Pebble) Get(key []byte) ([]byte, error) {
	v, c, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	c.Close()
	return out, nil
}

// Scan implements Engine.
func (p *Pebble) Scan(prefix, start []byte, fn func(k, v []byte) bool) error {
	lower := prefix
	if len(start) > 0 && string(start) > string(prefix) {
		lower = start
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key(), it.Value()) {
			break
		}
	}
	return it.Close()
}

// prefixEnd returns the smallest key greater than every key with prefix.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// Apply implements Engine.
//
// Synced batches go into the intent log too, although Pebble persists
// them itself: the log is replayed over the engine at open, and a record
// of an older unsynced batch replayed over a later synced one would bring
// back the value the synced batch replaced (a chunk location a migration
// had moved, say). With every batch in the log, in commit order, replay
// ends in the state the engine had. (Batches that touch the same key
// concurrently must be ordered by the caller, as they must be anyway.)
func (p *Pebble) Apply(b *Batch, sync bool) error {
	if sync {
		p.mu.Lock()
		err := p.log.append(b)
		p.mu.Unlock()
		if err != nil {
			return err
		}
		return p.commit(b, true) // outside mu: concurrent syncs share one fsync
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.log.append(b); err != nil {
		return err
	}
	if err := p.commit(b, false); err != nil {
		return err
	}
	if p.log.size > intentLogLimit {
		return p.syncLocked()
	}
	return nil
}

// syncLocked makes the engine durable and empties the intent log. Caller
// holds mu (or has the engine to itself).
func (p *Pebble) syncLocked() error {
	if err := p.db.LogData(nil, pebble.Sync); err != nil {
		return err
	}
	return p.log.reset()
}

func (p *Pebble) commit(b *Batch, sync bool) error {
	pb := p.db.NewBatch()
	for _, op := range b.Ops {
		if op.Delete {
			pb.Delete(op.Key, nil)
		} else {
			pb.Set(op.Key, op.Value, nil)
		}
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	return pb.Commit(opts)
}

// Sync implements Engine: an empty synced write flushes the WAL.
func (p *Pebble) Sync() error {
	return p.db.LogData(nil, pebble.Sync)
}

// Close implements Engine.
func (p *Pebble) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.syncLocked()
	p.log.f.Close()
	if cerr := p.db.Close(); err == nil {
		err = cerr
	}
	return err
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
