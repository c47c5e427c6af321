package engine

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble"
)

func init() {
	Register("pebble", func(dir string) (Engine, error) { return OpenPebble(dir) })
}

// Pebble is the embedded persistent engine (an LSM tree with a write-ahead
// log). Concurrent synchronous commits share one WAL fsync (group commit),
// which is why it was chosen over bbolt; see docs/metadata.md.
type Pebble struct {
	db *pebble.DB
}

var _ Engine = (*Pebble)(nil)

// OpenPebble opens or creates a Pebble store in dir.
func OpenPebble(dir string) (*Pebble, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	return &Pebble{db: db}, nil
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
func (p *Pebble) Apply(b *Batch, sync bool) error {
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
func (p *Pebble) Close() error { return p.db.Close() }

type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
