package engine

import (
	"bytes"
	"sort"
	"strings"
	"sync"
)

func init() {
	Register("mem", func(Target) (Engine, error) { return NewMem(), nil })
}

// Mem is an in-memory engine for tests: a sorted key slice and a map.
// Nothing survives Close.
type Mem struct {
	mu   sync.RWMutex // guards keys, vals
	keys []string     // sorted
	vals map[string][]byte
}

// NewMem returns an empty in-memory engine.
func NewMem() *Mem { return &Mem{vals: map[string][]byte{}} }

var _ Engine = (*Mem)(nil)

// Get implements Engine.
func (m *Mem) Get(key []byte) ([]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.vals[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

// Scan implements Engine. Like a Pebble iterator it does not hold the
// engine while fn runs: it copies up to scanBatch entries under the read
// lock, releases it, and calls fn on them, so fn may call the engine
// (a Get inside fn under a held read lock deadlocks as soon as an Apply
// waits between the two: RWMutex lets no new reader in past a waiting
// writer). Entries applied during the scan are seen or not, as with an
// iterator.
func (m *Mem) Scan(prefix, start []byte, fn func(k, v []byte) bool) error {
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	from := string(start)
	inclusive := true
	type kv struct{ k, v []byte }
	batch := make([]kv, 0, scanBatch)
	for {
		batch = batch[:0]
		m.mu.RLock()
		i := sort.SearchStrings(m.keys, from)
		if !inclusive && i < len(m.keys) && m.keys[i] == from {
			i++
		}
		for ; i < len(m.keys) && len(batch) < scanBatch; i++ {
			k := m.keys[i]
			if !strings.HasPrefix(k, string(prefix)) {
				break
			}
			batch = append(batch, kv{[]byte(k), append([]byte(nil), m.vals[k]...)})
		}
		more := len(batch) == scanBatch
		m.mu.RUnlock()
		for _, e := range batch {
			if !fn(e.k, e.v) {
				return nil
			}
		}
		if !more {
			return nil
		}
		from, inclusive = string(batch[len(batch)-1].k), false
	}
}

// scanBatch is how many entries Scan copies at a time.
const scanBatch = 256

// Apply implements Engine.
func (m *Mem) Apply(b *Batch, _ bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range b.Ops {
		k := string(op.Key)
		_, exists := m.vals[k]
		i := sort.SearchStrings(m.keys, k)
		if op.Delete {
			if exists {
				delete(m.vals, k)
				m.keys = append(m.keys[:i], m.keys[i+1:]...)
			}
			continue
		}
		if !exists {
			m.keys = append(m.keys, "")
			copy(m.keys[i+1:], m.keys[i:])
			m.keys[i] = k
		}
		m.vals[k] = append([]byte(nil), op.Value...)
	}
	return nil
}

// Sync implements Engine.
func (m *Mem) Sync() error { return nil }

// Close implements Engine.
func (m *Mem) Close() error { return nil }
