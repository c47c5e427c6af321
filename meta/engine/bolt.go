package engine

import (
	"bytes"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

func init() {
	Register("bolt", func(t Target) (Engine, error) { return OpenBolt(t.Dir) })
}

// Bolt is a bbolt (B+tree, copy-on-write) engine, kept as the comparison
// point for the engine choice and for read-mostly deployments. Every commit
// with sync fsyncs on its own: bbolt has no group commit.
type Bolt struct {
	db *bolt.DB
}

var _ Engine = (*Bolt)(nil)

var bucket = []byte("sluice")

// OpenBolt opens or creates dir/meta.bolt.
func OpenBolt(dir string) (*Bolt, error) {
	db, err := bolt.Open(filepath.Join(dir, "meta.bolt"), 0o600, nil)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Bolt{db: db}, nil
}

// Get implements Engine.
func (b *Bolt) Get(key []byte) ([]byte, error) {
	var out []byte
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get(key)
		if v == nil {
			return ErrNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// Scan implements Engine. As Mem's, it copies up to scanBatch entries in
// a read transaction and calls fn outside it, so fn may call the engine
// (an Update while this goroutine holds a read transaction can wait for
// it forever when bbolt must grow its map).
func (b *Bolt) Scan(prefix, start []byte, fn func(k, v []byte) bool) error {
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	from := append([]byte(nil), start...)
	inclusive := true
	var batch [][2][]byte
	for {
		batch = batch[:0]
		err := b.db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			k, v := c.Seek(from)
			if !inclusive && k != nil && bytes.Equal(k, from) {
				k, v = c.Next()
			}
			for ; k != nil && bytes.HasPrefix(k, prefix) && len(batch) < scanBatch; k, v = c.Next() {
				batch = append(batch, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range batch {
			if !fn(e[0], e[1]) {
				return nil
			}
		}
		if len(batch) < scanBatch {
			return nil
		}
		from, inclusive = batch[len(batch)-1][0], false
	}
}

// Apply implements Engine. bbolt always syncs a commit, so sync is moot.
func (b *Bolt) Apply(batch *Batch, _ bool) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucket)
		for _, op := range batch.Ops {
			var err error
			if op.Delete {
				err = bk.Delete(op.Key)
			} else {
				err = bk.Put(op.Key, op.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Sync implements Engine.
func (b *Bolt) Sync() error { return b.db.Sync() }

// Close implements Engine.
func (b *Bolt) Close() error { return b.db.Close() }
