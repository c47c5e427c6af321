package engine

import (
	"bytes"
	"sort"
	"sync"
)

func init() {
	Register("mem", func(string) (Engine, error) { return NewMem(), nil })
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

// Scan implements Engine.
func (m *Mem) Scan(prefix, start []byte, fn func(k, v []byte) bool) error {
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	i := sort.SearchStrings(m.keys, string(start))
	for ; i < len(m.keys); i++ {
		k := m.keys[i]
		if !bytes.HasPrefix([]byte(k), prefix) {
			break
		}
		if !fn([]byte(k), m.vals[k]) {
			break
		}
	}
	return nil
}

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
