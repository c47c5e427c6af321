// Package beacon is sluice's end-to-end I/O monitor (after Sunway
// TaihuLight's Beacon): every layer (client, forwarding node, data server)
// records each operation it serves with the job, rank and node behind it;
// records are aggregated per time window, deduplicated and compressed
// before they leave the daemon (collector.go), kept in an embedded store
// with bounded size and retention (store.go), and analysed per job
// (analysis.go), per application (profile.go) and across jobs and servers
// (detect.go: interference and fail-slow).
//
// The collector, the analyses and the detectors are pure: callers pass the
// time and the records. Only the store touches the disk. The package must
// not know about FUSE, the data path or the metadata schema; daemons call
// it, never the other way round.
package beacon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sluice-hpc/sluice/internal/varbuf"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Layer is where a record was taken.
type Layer uint8

// Layers, from the application down.
const (
	LayerClient Layer = iota + 1
	LayerFwd
	LayerData
)

func (l Layer) String() string {
	switch l {
	case LayerClient:
		return "client"
	case LayerFwd:
		return "fwd"
	case LayerData:
		return "data"
	}
	return fmt.Sprintf("layer(%d)", uint8(l))
}

// ParseLayer is the inverse of Layer.String.
func ParseLayer(s string) (Layer, error) {
	for _, l := range []Layer{LayerClient, LayerFwd, LayerData} {
		if l.String() == s {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown layer %q (client, fwd, data)", s)
}

// Op kinds, coarser than wire ops: what the analyses need.
const (
	OpRead  = "read"
	OpWrite = "write"
	OpMeta  = "meta" // prefix: meta ops are recorded as "meta:<name>"
)

// Op is one operation as a layer saw it, before aggregation.
type Op struct {
	Start    time.Time
	wire.Who // job, rank, compute node, application (client layer)
	Uid      uint32
	Name     string // "read", "write" or "meta:<op>"
	Ino      uint64
	Off      uint64
	Size     uint64
	Lat      time.Duration // service latency in this layer
	Wait     time.Duration // time queued in this layer before service
	// QoSWait is the part of Wait spent at the layer's QoS gate (its
	// rules' shares and caps, docs/qos.md).
	QoSWait time.Duration
	Err     bool
	// N is how many operations this one stands for (a batch of creates
	// sent at once); 0 means 1. Its latency and wait are the batch's, so
	// the record's mean is the batch's time shared over its operations.
	N uint32
}

// Record is the stored form: one or more operations with equal job, rank,
// node, operation, file and request size within one window of one server,
// collapsed into one with a count.
type Record struct {
	Window int64 // window start, unix ns
	Layer  Layer
	Server string // the recording daemon: "fwd-3", "data-1", "client@node"
	wire.Who
	Uid    uint32
	Op     string
	Ino    uint64
	Size   uint64 // request size of each operation
	Count  uint64 // operations
	Bytes  uint64 // bytes moved (reads and writes)
	Seq    uint64 // operations that started where the previous one ended
	OffMin uint64
	OffMax uint64 // end of the furthest operation
	First  int64  // start of the first operation, unix ns
	Last   int64  // end of the last operation, unix ns
	LatSum int64  // ns
	LatMax int64
	Wait   int64 // ns, summed
	// QoSWait is the part of Wait spent at QoS gates, ns summed.
	QoSWait int64
	Errors  uint64
}

// IsData reports whether the record is a read or a write.
func (r *Record) IsData() bool { return r.Op == OpRead || r.Op == OpWrite }

// IsMeta reports whether the record is a metadata operation.
func (r *Record) IsMeta() bool { return len(r.Op) > 5 && r.Op[:5] == "meta:" }

// MeanLat is the mean service latency.
func (r *Record) MeanLat() time.Duration {
	if r.Count == 0 {
		return 0
	}
	return time.Duration(r.LatSum / int64(r.Count))
}

// encVersion 2 added QoSWait; version 1 batches (stored before) decode
// with none.
const encVersion = 2

// Encode serialises records (varints, strings with lengths) and compresses
// them with zstd.
func Encode(recs []Record) []byte {
	b := []byte{encVersion}
	b = binary.AppendUvarint(b, uint64(len(recs)))
	for i := range recs {
		r := &recs[i]
		b = binary.AppendVarint(b, r.Window)
		b = append(b, byte(r.Layer))
		b = varbuf.AppendStr(b, r.Server)
		b = varbuf.AppendStr(b, r.Job)
		b = varbuf.AppendStr(b, r.App)
		b = binary.AppendUvarint(b, uint64(r.Uid))
		b = binary.AppendVarint(b, int64(r.Rank))
		b = varbuf.AppendStr(b, r.Node)
		b = varbuf.AppendStr(b, r.Op)
		for _, v := range []uint64{r.Ino, r.Size, r.Count, r.Bytes, r.Seq, r.OffMin, r.OffMax, r.Errors} {
			b = binary.AppendUvarint(b, v)
		}
		for _, v := range []int64{r.First, r.Last, r.LatSum, r.LatMax, r.Wait, r.QoSWait} {
			b = binary.AppendVarint(b, v)
		}
	}
	return encoder.EncodeAll(b, nil)
}

// ErrCorrupt reports an undecodable batch.
var ErrCorrupt = errors.New("beacon: corrupt record batch")

// maxBatch bounds what Decode accepts, so a hostile batch cannot make it
// allocate without bound.
const maxBatch = 64 << 20

// Decode is the inverse of Encode.
func Decode(z []byte) ([]Record, error) {
	b, err := decoder.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(b) > maxBatch {
		return nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	d := varbuf.Reader{B: b, Bad: fmt.Errorf("%w: truncated", ErrCorrupt)}
	version := d.Byte()
	if version != 1 && version != encVersion {
		return nil, fmt.Errorf("%w: unknown version", ErrCorrupt)
	}
	n := d.Count(1)
	recs := make([]Record, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		var r Record
		r.Window = d.Varint()
		r.Layer = Layer(d.Byte())
		r.Server = d.Str()
		r.Job = d.Str()
		r.App = d.Str()
		r.Uid = uint32(d.Uvarint())
		r.Rank = int32(d.Varint())
		r.Node = d.Str()
		r.Op = d.Str()
		for _, p := range []*uint64{&r.Ino, &r.Size, &r.Count, &r.Bytes, &r.Seq, &r.OffMin, &r.OffMax, &r.Errors} {
			*p = d.Uvarint()
		}
		for _, p := range []*int64{&r.First, &r.Last, &r.LatSum, &r.LatMax, &r.Wait} {
			*p = d.Varint()
		}
		if version >= 2 {
			r.QoSWait = d.Varint()
		}
		recs = append(recs, r)
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return recs, nil
}

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBatch))
)
