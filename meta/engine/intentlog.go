package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
)

// intentLog makes unsynced commits survive a crash of the process: each
// batch is handed to the kernel with one write(2) before it is applied, so
// a kill -9 right after the acknowledgement cannot lose it, without paying
// an fsync per operation. Pebble's own WAL buffers unsynced commits in user
// space, which a kill -9 can lose. On open the log is replayed into the
// engine, which then syncs; the log is truncated whenever the engine has
// synced everything in it.
//
// Record: u32 payload length, u32 CRC-32C of the payload, payload = ops of
// (u8 delete flag, uvarint key length, key, uvarint value length, value).
type intentLog struct {
	f    *os.File
	size int64
	buf  []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func openIntentLog(path string) (*intentLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &intentLog{f: f, size: st.Size()}, nil
}

func encodeBatch(dst []byte, b *Batch) []byte {
	for _, op := range b.Ops {
		if op.Delete {
			dst = append(dst, 1)
		} else {
			dst = append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
		dst = append(dst, op.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(op.Value)))
		dst = append(dst, op.Value...)
	}
	return dst
}

var errBadRecord = errors.New("intent log: bad record")

func decodeBatch(p []byte) (*Batch, error) {
	b := &Batch{}
	for len(p) > 0 {
		del := p[0]
		p = p[1:]
		kl, n := binary.Uvarint(p)
		if n <= 0 || kl > uint64(len(p)-n) {
			return nil, errBadRecord
		}
		k := p[n : n+int(kl)]
		p = p[n+int(kl):]
		vl, n := binary.Uvarint(p)
		if n <= 0 || vl > uint64(len(p)-n) {
			return nil, errBadRecord
		}
		v := p[n : n+int(vl)]
		p = p[n+int(vl):]
		if del == 1 {
			b.Del(k)
		} else {
			b.Set(k, v)
		}
	}
	return b, nil
}

// append writes one record with a single write(2).
func (l *intentLog) append(b *Batch) error {
	l.buf = append(l.buf[:0], make([]byte, 8)...)
	l.buf = encodeBatch(l.buf, b)
	p := l.buf[8:]
	binary.LittleEndian.PutUint32(l.buf[0:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(l.buf[4:8], crc32.Checksum(p, castagnoli))
	n, err := l.f.Write(l.buf)
	l.size += int64(n)
	return err
}

// replay calls fn for every intact record, stopping at the first torn or
// corrupt one (the tail a crash may leave).
func (l *intentLog) replay(fn func(*Batch) error) error {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReader(l.f)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n > 64<<20 {
			return nil
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return nil
		}
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return nil
		}
		b, err := decodeBatch(p)
		if err != nil {
			return nil
		}
		if err := fn(b); err != nil {
			return err
		}
	}
}

// reset empties the log once the engine has synced everything in it.
func (l *intentLog) reset() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	l.size = 0
	return nil
}
