// Package workload generates the application I/O behaviours of the DFRA
// study, one rank at a time, through any POSIX directory: N-N bandwidth,
// N-1 shared file, 1-1 (rank 0 does all the I/O), metadata storms, small
// random I/O, periodic checkpointing, read-mostly N-N (input loading) and
// a 1-1 log of small synchronous appends. `sluice workload` runs a job of
// them (one process per rank, with the job id and rank in the environment
// as a batch system sets them); tests and benchmarks use the behaviours as
// ground truth for Beacon's classification and DFRA's experiments.
//
// It knows nothing of sluice's internals: it only makes system calls.
package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Kinds of behaviour.
const (
	NN         = "nn"   // each rank writes then reads its own file, 1 MiB requests
	N1         = "n1"   // all ranks write then read one shared file, strided
	OneOne     = "11"   // rank 0 writes and reads all the data; the others idle
	Meta       = "meta" // each rank creates, stats and removes many empty files
	IOPS       = "iops" // each rank reads 4 KiB at random offsets of its file
	Checkpoint = "ckpt" // each rank writes a file per burst, idle between bursts
	Read       = "read" // each rank reads its own (staged, untimed) file ReadPasses times
	Log        = "log"  // rank 0 appends Ops 4 KiB records, fsync every 64; the others idle
)

// ReadPasses is how often a "read" rank reads its file.
const ReadPasses = 3

// Kinds lists every behaviour with what Beacon should call it: the I/O
// mode and behaviour class.
var Kinds = []struct {
	Kind, Mode, Class string
}{
	{NN, "N-N", "bandwidth"},
	{N1, "N-1", "bandwidth"},
	{OneOne, "1-1", "bandwidth"},
	{Meta, "none", "metadata"},
	{IOPS, "N-N", "iops"},
	{Checkpoint, "N-N", "checkpoint"},
	{Read, "N-N", "bandwidth"},
	{Log, "1-1", "iops"},
}

// Params size one rank's work.
type Params struct {
	Dir    string
	Rank   int
	Ranks  int
	Size   int64         // bytes per rank (nn, n1, ckpt in all); rank 0's for 11 is Size×Ranks
	Block  int           // request size for bulk I/O (default 1 MiB)
	Ops    int           // files (meta) or reads (iops) per rank
	Bursts int           // checkpoints (ckpt; default 3)
	Period time.Duration // idle time between checkpoints (default 2.5 s)
	Seed   int64
	// SharedDir puts every rank's files of the meta behaviour in one
	// directory (meta.shared) instead of one per rank (meta.RANK).
	SharedDir bool
	// StartAt, if set, is when every rank starts its I/O (a barrier: the
	// launcher sets it past the time it takes to start every rank).
	StartAt time.Time
}

// Result is one rank's outcome.
type Result struct {
	Rank   int
	Bytes  int64
	Ops    int
	IOTime time.Duration // time spent in I/O (excluding ckpt idle periods)
	End    time.Time     // when the rank's I/O ended
}

func (p *Params) defaults() {
	if p.Block <= 0 {
		p.Block = 1 << 20
	}
	if p.Ranks <= 0 {
		p.Ranks = 1
	}
	if p.Bursts <= 0 {
		p.Bursts = 3
	}
	if p.Period <= 0 {
		p.Period = 2500 * time.Millisecond
	}
	if p.Ops <= 0 {
		p.Ops = 1000
	}
}

// Run performs one rank's part of a behaviour and checks what it read.
func Run(kind string, p Params) (Result, error) {
	p.defaults()
	res := Result{Rank: p.Rank}
	if d := time.Until(p.StartAt); !p.StartAt.IsZero() && d > 0 {
		time.Sleep(d)
	}
	start := time.Now()
	var err error
	switch kind {
	case NN:
		f := filepath.Join(p.Dir, fmt.Sprintf("nn.%d", p.Rank))
		err = writeRead(f, p, 0, 1, p.Size, &res)
	case N1:
		f := filepath.Join(p.Dir, "n1.shared")
		err = writeRead(f, p, p.Rank, p.Ranks, p.Size*int64(p.Ranks), &res)
	case OneOne:
		if p.Rank == 0 {
			err = writeRead(filepath.Join(p.Dir, "11.out"), p, 0, 1, p.Size*int64(p.Ranks), &res)
		} else {
			_, err = os.Stat(p.Dir) // present in the job, no I/O
		}
	case Meta:
		err = metaStorm(p, &res)
	case IOPS:
		err = smallRandom(p, &res)
	case Checkpoint:
		for b := 0; b < p.Bursts && err == nil; b++ {
			if b > 0 {
				idle := time.Now()
				time.Sleep(p.Period)
				start = start.Add(time.Since(idle))
			}
			f := filepath.Join(p.Dir, fmt.Sprintf("ckpt.%d.%d", b, p.Rank))
			err = writeOnly(f, p, p.Size/int64(p.Bursts), &res)
		}
	case Read:
		f := filepath.Join(p.Dir, fmt.Sprintf("read.%d", p.Rank))
		var staged Result
		if err = writeOnly(f, p, p.Size, &staged); err == nil {
			start = time.Now() // staging the input is not the job's I/O
			for i := 0; i < ReadPasses && err == nil; i++ {
				err = readBack(f, p, p.Size, &res)
			}
		}
	case Log:
		if p.Rank == 0 {
			err = appendLog(filepath.Join(p.Dir, "log.out"), p, &res)
		} else {
			_, err = os.Stat(p.Dir)
		}
	default:
		return res, fmt.Errorf("unknown behaviour %q (nn, n1, 11, meta, iops, ckpt, read, log)", kind)
	}
	res.IOTime = time.Since(start)
	res.End = time.Now()
	return res, err
}

// block returns the content of block i of a file (checkable on read).
func block(buf []byte, file string, i int64) []byte {
	h := uint64(i)*0x9e3779b97f4a7c15 ^ uint64(len(file))*0xbf58476d1ce4e5b9
	for j := 0; j+8 <= len(buf); j += 8 {
		h ^= h << 13
		h ^= h >> 7
		h ^= h << 17
		for k := 0; k < 8; k++ {
			buf[j+k] = byte(h >> (8 * k))
		}
	}
	return buf
}

// writeRead writes blocks first, first+stride, ... of a size-byte file,
// fsyncs, and reads them back, checking their content.
func writeRead(path string, p Params, first, stride int, size int64, res *Result) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	bs := int64(p.Block)
	buf := make([]byte, bs)
	for i := int64(first); i*bs < size; i += int64(stride) {
		if _, err := f.WriteAt(block(buf, filepath.Base(path), i), i*bs); err != nil {
			return err
		}
		res.Bytes += bs
		res.Ops++
	}
	if err := f.Sync(); err != nil {
		return err
	}
	want := make([]byte, bs)
	for i := int64(first); i*bs < size; i += int64(stride) {
		if _, err := f.ReadAt(buf, i*bs); err != nil {
			return err
		}
		if !bytes.Equal(buf, block(want, filepath.Base(path), i)) {
			return fmt.Errorf("%s: block %d reads back different data", path, i)
		}
		res.Bytes += bs
		res.Ops++
	}
	return f.Close()
}

// readBack reads a file written by writeOnly and checks every block.
func readBack(path string, p Params, size int64, res *Result) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf, want := make([]byte, p.Block), make([]byte, p.Block)
	for off := int64(0); off < size; off += int64(p.Block) {
		if _, err := io.ReadFull(f, buf); err != nil {
			return fmt.Errorf("%s at %d: %v", path, off, err)
		}
		if !bytes.Equal(buf, block(want, filepath.Base(path), off)) {
			return fmt.Errorf("%s: block at %d reads back different data", path, off)
		}
		res.Bytes += int64(p.Block)
		res.Ops++
	}
	return nil
}

// appendLog appends p.Ops 4 KiB records, syncing every 64, then checks
// the file's length.
func appendLog(path string, p Params, res *Result) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	rec := make([]byte, 4096)
	for i := 0; i < p.Ops; i++ {
		copy(rec, fmt.Sprintf("record %d of rank %d\n", i, p.Rank))
		if _, err := f.Write(rec); err != nil {
			return err
		}
		res.Bytes += int64(len(rec))
		res.Ops++
		if i%64 == 63 {
			if err := f.Sync(); err != nil {
				return err
			}
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != int64(p.Ops)*4096 {
		return fmt.Errorf("%s: %d records appended, size %d", path, p.Ops, st.Size())
	}
	return f.Close()
}

func writeOnly(path string, p Params, size int64, res *Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, p.Block)
	for off := int64(0); off < size; off += int64(p.Block) {
		if _, err := f.Write(block(buf, filepath.Base(path), off)); err != nil {
			return err
		}
		res.Bytes += int64(p.Block)
		res.Ops++
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func metaStorm(p Params, res *Result) error {
	dir, prefix := filepath.Join(p.Dir, fmt.Sprintf("meta.%d", p.Rank)), "f"
	if p.SharedDir {
		dir, prefix = filepath.Join(p.Dir, "meta.shared"), fmt.Sprintf("r%d.f", p.Rank)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, p.Ops)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("%s%06d", prefix, i))
		f, err := os.Create(names[i])
		if err != nil {
			return err
		}
		f.Close()
	}
	for _, n := range names {
		if _, err := os.Stat(n); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	mine := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			mine++
		}
	}
	if mine != len(names) {
		return fmt.Errorf("%s lists %d of this rank's files, created %d", dir, mine, len(names))
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			return err
		}
	}
	res.Ops = 3 * p.Ops
	if err := os.Remove(dir); err != nil && !(p.SharedDir && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, os.ErrNotExist))) {
		return err
	}
	return nil
}

// IOPSFileSize is the file each rank of the iops behaviour writes (in
// 1 MiB blocks, as part of its I/O) and then reads 4 KiB at a time.
const IOPSFileSize = 8 << 20

func smallRandom(p Params, res *Result) error {
	const fileSize = IOPSFileSize
	path := filepath.Join(p.Dir, fmt.Sprintf("iops.%d", p.Rank))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	// the file's content, generated once: checking a 4 KiB read must not
	// cost more than the read
	content := make([]byte, fileSize)
	for off := int64(0); off < fileSize; off += 1 << 20 {
		block(content[off:off+1<<20], "iops", off>>20)
		if _, err := f.WriteAt(content[off:off+1<<20], off); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewSource(p.Seed + int64(p.Rank)))
	small := make([]byte, 4096)
	for i := 0; i < p.Ops; i++ {
		off := rng.Int63n(fileSize/4096) * 4096
		if _, err := f.ReadAt(small, off); err != nil {
			return err
		}
		if !bytes.Equal(small, content[off:off+4096]) {
			return fmt.Errorf("%s: 4 KiB at %d reads back different data", path, off)
		}
		res.Bytes += 4096
		res.Ops++
	}
	return f.Close()
}

// Summary aggregates a job's rank results.
type Summary struct {
	Ranks   int
	Bytes   int64
	Ops     int
	Slowest time.Duration // the job's I/O time: its slowest rank
	Median  time.Duration
	Fastest time.Duration
	// Span is from the first rank's start of I/O to the last one's end
	// (bytes / Span is the job's aggregate bandwidth).
	Span time.Duration
}

// Summarise aggregates rank results.
func Summarise(rs []Result) Summary {
	s := Summary{Ranks: len(rs)}
	var ts []time.Duration
	var first, last time.Time
	for _, r := range rs {
		s.Bytes += r.Bytes
		s.Ops += r.Ops
		ts = append(ts, r.IOTime)
		if r.End.IsZero() {
			continue
		}
		if b := r.End.Add(-r.IOTime); first.IsZero() || b.Before(first) {
			first = b
		}
		if r.End.After(last) {
			last = r.End
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	if len(ts) > 0 {
		s.Slowest = ts[len(ts)-1]
		s.Median = ts[len(ts)/2]
		s.Fastest = ts[0]
	}
	if !first.IsZero() {
		s.Span = last.Sub(first)
	}
	return s
}
