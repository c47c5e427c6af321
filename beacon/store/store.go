// Package store keeps Beacon's records, job index, application profiles and
// forwarding decisions in an embedded Pebble database (in the metadata
// daemon). It owns persistence and retention only: records, analysis and
// detection are the beacon core's, which must not depend on it.
package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/sluice-hpc/sluice/beacon"
)

// Store keeps record batches in an embedded Pebble database, one value per
// (window, layer, server, sequence) holding the compressed records, with an
// index by job. It enforces a retention period and a size bound (oldest
// windows go first). Every write is in the kernel's hands when it returns
// (a write-ahead log sync, which walNoSync makes a write without fsync),
// so a killed process loses no record it acknowledged; a power cut may
// lose the last seconds: monitoring data is not durable state. (Written
// without a sync, Pebble keeps its log in memory until a block of it
// fills: a killed monitor lost every record of a light load.)
//
// Keys:
//
//	w <window be64> <layer> <server> 0 <seq be64>  → compressed records
//	j <job> 0 <window be64> <layer> <server> 0 <seq be64> → "" (index)
//	J <job>                                         → beacon.JobInfo (JSON)
//	p <app key>                                     → beacon.Profile (JSON)
type Store struct {
	db        *pebble.DB
	retention time.Duration
	maxBytes  int64

	mu    sync.Mutex // guards seq, bytes, jobs
	seq   uint64
	bytes int64 // compressed record bytes held
	jobs  map[string]*beacon.JobInfo
}

// Options bound a store.
type Options struct {
	Retention time.Duration // default 7 days
	MaxBytes  int64         // compressed records kept; default 1 GiB
}

type quiet struct{}

func (quiet) Infof(string, ...interface{})  {}
func (quiet) Errorf(string, ...interface{}) {}
func (quiet) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf(format, args...))
}

// Open opens (creating) the store in dir; an empty dir keeps it in
// memory.
func Open(dir string, opt Options) (*Store, error) {
	if opt.Retention <= 0 {
		opt.Retention = 7 * 24 * time.Hour
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = 1 << 30
	}
	o := &pebble.Options{Logger: quiet{}, FS: walNoSync{vfs.Default}}
	if dir == "" {
		o.FS = vfs.NewMem() // no state directory: keep records in memory
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, fmt.Errorf("beacon store %s: %w", dir, err)
	}
	s := &Store{db: db, retention: opt.Retention, maxBytes: opt.MaxBytes, jobs: map[string]*beacon.JobInfo{}}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("w"), UpperBound: []byte("x")})
	if err != nil {
		db.Close()
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		s.bytes += int64(len(it.Value()))
		if q := binary.BigEndian.Uint64(it.Key()[len(it.Key())-8:]); q > s.seq {
			s.seq = q
		}
	}
	it.Close()
	it, err = db.NewIter(&pebble.IterOptions{LowerBound: []byte("J"), UpperBound: []byte("K")})
	if err != nil {
		db.Close()
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		var ji beacon.JobInfo
		if json.Unmarshal(it.Value(), &ji) == nil {
			s.jobs[ji.Job] = &ji
		}
	}
	it.Close()
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func be64(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }

func blobKey(window int64, layer beacon.Layer, server string, seq uint64) []byte {
	k := be64([]byte{'w'}, window)
	k = append(k, byte(layer))
	k = append(k, server...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// Put stores one compressed batch as a daemon shipped it.
func (s *Store) Put(batch []byte) error {
	recs, err := beacon.Decode(batch)
	if err != nil {
		return err
	}
	return s.PutRecords(recs)
}

// PutRecords stores records, split by window and server.
func (s *Store) PutRecords(recs []beacon.Record) error {
	type group struct {
		window int64
		layer  beacon.Layer
		server string
	}
	groups := map[group][]beacon.Record{}
	for _, r := range recs {
		g := group{r.Window, r.Layer, r.Server}
		groups[g] = append(groups[g], r)
	}
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	var added int64
	touched := map[string]bool{}
	for g, rs := range groups {
		s.seq++
		key := blobKey(g.window, g.layer, g.server, s.seq)
		val := beacon.Encode(rs)
		b.Set(key, val, nil)
		added += int64(len(val))
		jobs := map[string]bool{}
		for _, r := range rs {
			jobs[r.Job] = true
			ji := s.jobs[r.Job]
			if ji == nil {
				ji = &beacon.JobInfo{Job: r.Job, First: r.Window, Last: r.Window}
				s.jobs[r.Job] = ji
			}
			if ji.App == "" && r.App != "" {
				ji.App, ji.Uid = r.App, r.Uid
			}
			ji.First = min(ji.First, r.Window)
			ji.Last = max(ji.Last, r.Window)
			// every operation passes a forwarding node: count it there
			// once, not at each layer
			if r.Layer == beacon.LayerFwd {
				ji.Ops += r.Count
				ji.Bytes += r.Bytes
			}
			touched[r.Job] = true
		}
		for j := range jobs {
			ik := append([]byte{'j'}, j...)
			ik = append(ik, 0)
			ik = append(ik, key[1:]...)
			b.Set(ik, nil, nil)
		}
	}
	for j := range touched {
		v, _ := json.Marshal(s.jobs[j])
		b.Set(append([]byte{'J'}, j...), v, nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	s.bytes += added
	return nil
}

// walNoSync is the store's file system: the write-ahead log's syncs do
// nothing, so that a synced write puts the log's records in the kernel's
// hands without waiting for the disk (a shared disk's fsync at a
// cluster's start waits behind the data servers' device probes). Tables
// and the manifest still sync.
type walNoSync struct{ vfs.FS }

func (f walNoSync) Create(name string) (vfs.File, error) {
	return noSyncIfWAL(name)(f.FS.Create(name))
}

func (f walNoSync) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	return noSyncIfWAL(newname)(f.FS.ReuseForWrite(oldname, newname))
}

func noSyncIfWAL(name string) func(vfs.File, error) (vfs.File, error) {
	return func(file vfs.File, err error) (vfs.File, error) {
		if err != nil || !strings.HasSuffix(name, ".log") {
			return file, err
		}
		return noSyncFile{file}, nil
	}
}

// noSyncFile is a write-ahead log whose syncs do nothing.
type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error                { return nil }
func (noSyncFile) SyncData() error            { return nil }
func (noSyncFile) SyncTo(int64) (bool, error) { return true, nil }

// MarkProfiled records that the job's windows up to upTo are in its
// application's profile.
func (s *Store) MarkProfiled(job string, upTo int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ji := s.jobs[job]
	if ji == nil {
		return nil
	}
	ji.Profiled = upTo
	v, _ := json.Marshal(ji)
	return s.db.Set(append([]byte{'J'}, job...), v, pebble.Sync)
}

// Query returns the records matching f, oldest window first.
func (s *Store) Query(f beacon.Filter) ([]beacon.Record, error) {
	lo, hi := f.Bounds()
	var keys [][]byte
	if f.Job != "" {
		prefix := append([]byte{'j'}, f.Job...)
		prefix = append(prefix, 0)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: be64(bytes.Clone(prefix), lo), UpperBound: be64(bytes.Clone(prefix), hi)})
		if err != nil {
			return nil, err
		}
		for it.First(); it.Valid(); it.Next() {
			keys = append(keys, append([]byte{'w'}, it.Key()[len(prefix):]...))
		}
		it.Close()
	}
	var out []beacon.Record
	add := func(v []byte) error {
		recs, err := beacon.Decode(v)
		if err != nil {
			return err
		}
		for i := range recs {
			if f.Match(&recs[i]) {
				out = append(out, recs[i])
			}
		}
		return nil
	}
	if f.Job != "" {
		for _, k := range keys {
			v, closer, err := s.db.Get(k)
			if errors.Is(err, pebble.ErrNotFound) {
				continue // trimmed since
			}
			if err != nil {
				return nil, err
			}
			err = add(v)
			closer.Close()
			if err != nil {
				return nil, err
			}
		}
	} else {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: be64([]byte{'w'}, lo), UpperBound: be64([]byte{'w'}, hi)})
		if err != nil {
			return nil, err
		}
		for it.First(); it.Valid(); it.Next() {
			if err := add(it.Value()); err != nil {
				it.Close()
				return nil, err
			}
		}
		it.Close()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Window < out[j].Window })
	return out, nil
}

// Jobs lists the jobs the store knows, most recent first.
func (s *Store) Jobs() []beacon.JobInfo {
	s.mu.Lock()
	out := make([]beacon.JobInfo, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, *j)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Last > out[j].Last })
	return out
}

// Bytes returns the compressed record bytes held.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Trim deletes windows older than the retention period at now, and the
// oldest windows while the store holds more than its size bound. It
// returns the number of batches deleted.
func (s *Store) Trim(now time.Time) (int, error) {
	cut := now.Add(-s.retention).UnixNano()
	if err := s.trimDecisions(cut); err != nil {
		return 0, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("w"), UpperBound: []byte("x")})
	if err != nil {
		return 0, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	s.mu.Lock()
	held := s.bytes
	s.mu.Unlock()
	var freed int64
	n := 0
	deadWindow := map[int64]bool{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		w := int64(binary.BigEndian.Uint64(k[1:9]))
		if w >= cut && held-freed <= s.maxBytes {
			break
		}
		b.Delete(k, nil)
		freed += int64(len(it.Value()))
		deadWindow[w] = true
		n++
	}
	it.Close()
	if n == 0 {
		return 0, nil
	}
	// index entries of the deleted windows
	jt, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("j"), UpperBound: []byte("k")})
	if err != nil {
		return 0, err
	}
	var maxDead int64
	for w := range deadWindow {
		maxDead = max(maxDead, w)
	}
	for jt.First(); jt.Valid(); jt.Next() {
		k := jt.Key()
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) < i+9 {
			continue
		}
		if w := int64(binary.BigEndian.Uint64(k[i+1 : i+9])); w <= maxDead {
			b.Delete(k, nil)
		}
	}
	jt.Close()
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.bytes -= freed
	s.mu.Unlock()
	return n, nil
}

// PutProfile stores an application profile under its key.
func (s *Store) PutProfile(p beacon.Profile) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.db.Set(append([]byte{'p'}, p.Key...), v, pebble.Sync)
}

// Profile returns the stored profile of an application key.
func (s *Store) Profile(key string) (beacon.Profile, bool, error) {
	v, closer, err := s.db.Get(append([]byte{'p'}, key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return beacon.Profile{}, false, nil
	}
	if err != nil {
		return beacon.Profile{}, false, err
	}
	defer closer.Close()
	var p beacon.Profile
	if err := json.Unmarshal(v, &p); err != nil {
		return beacon.Profile{}, false, err
	}
	return p, true, nil
}

// Profiles lists every stored profile.
func (s *Store) Profiles() ([]beacon.Profile, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("p"), UpperBound: []byte("q")})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []beacon.Profile
	for it.First(); it.Valid(); it.Next() {
		var p beacon.Profile
		if json.Unmarshal(it.Value(), &p) == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// decisionKey is 'd' job 0 at: a job's policy decisions in time order.
func decisionKey(job string, at int64) []byte {
	k := append([]byte{'d'}, job...)
	return be64(append(k, 0), at)
}

// PutDecision stores one policy decision about a job (an opaque JSON
// document, e.g. a forwarding-node placement with its reasons) at time at,
// so that `sluice job show ID` can show what was decided and why after the job
// has ended. Decisions are kept for the retention period.
func (s *Store) PutDecision(job string, at time.Time, v []byte) error {
	return s.db.Set(decisionKey(job, at.UnixNano()), v, pebble.Sync)
}

// Decisions returns a job's decisions, oldest first.
func (s *Store) Decisions(job string) ([][]byte, error) {
	_, vs, err := s.DecisionsAt(job)
	return vs, err
}

// DecisionsAt returns a job's decisions, oldest first, and when each was
// made (unix ns).
func (s *Store) DecisionsAt(job string) ([]int64, [][]byte, error) {
	lo := append(append([]byte{'d'}, job...), 0)
	hi := append(append([]byte{'d'}, job...), 1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, err
	}
	defer it.Close()
	var ats []int64
	var out [][]byte
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		ats = append(ats, int64(binary.BigEndian.Uint64(k[len(k)-8:])))
		out = append(out, bytes.Clone(it.Value()))
	}
	return ats, out, nil
}

// trimDecisions deletes decisions older than cut (unix ns).
func (s *Store) trimDecisions(cut int64) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("d"), UpperBound: []byte("e")})
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) >= 10 && int64(binary.BigEndian.Uint64(k[len(k)-8:])) < cut {
			b.Delete(bytes.Clone(k), nil)
		}
	}
	it.Close()
	return b.Commit(pebble.Sync)
}
