package e2e

import (
	"bytes"
	"math/rand"
	"os"
	"syscall"
	"testing"
)

// TestStreaming checks the client's write-behind and readahead keep POSIX
// meaning: a node sees its own writes at once (through any descriptor,
// in order, with sizes), readahead never serves data older than a write
// made through the mount, and a failed background write is reported by a
// later write or by close, never lost.
func TestStreaming(t *testing.T) {
	c := startCluster(t)

	t.Run("overlapping writes land in order", func(t *testing.T) {
		rng := rand.New(rand.NewSource(7))
		f, err := os.Create(c.path("order"))
		if err != nil {
			t.Fatal(err)
		}
		model := make([]byte, 4<<20)
		size := 0
		for i := 0; i < 300; i++ {
			off := rng.Intn(3 << 20)
			n := 1 + rng.Intn(1<<20)
			p := pattern(i, n)
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
			copy(model[off:], p)
			if off+n > size {
				size = off + n
			}
			if i%50 == 49 {
				// stat before close sees this node's size
				st, err := f.Stat()
				if err != nil || st.Size() != int64(size) {
					t.Fatalf("size before close: %v %v, want %d", st.Size(), err, size)
				}
				// a second descriptor reads what the first wrote
				got := mustRead(t, c.path("order"))
				if !bytes.Equal(got, model[:size]) {
					t.Fatalf("after %d writes another descriptor reads different data", i+1)
				}
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustRead(t, c.path("order")), model[:size]) {
			t.Fatal("file differs from the model after close")
		}
	})

	t.Run("readahead sees later writes", func(t *testing.T) {
		const mib = 1 << 20
		data := pattern(11, 32*mib)
		mustWrite(t, c.path("ra"), data)
		r, err := os.Open(c.path("ra"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w, err := os.OpenFile(c.path("ra"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		buf := make([]byte, mib)
		for i := 0; i < 32; i++ {
			if i == 4 || i == 12 {
				// overwrite a region the reader has fetched ahead
				p := pattern(100+i, 3*mib)
				if _, err := w.WriteAt(p, int64(i+1)*mib); err != nil {
					t.Fatal(err)
				}
				copy(data[(i+1)*mib:], p)
			}
			if i == 20 {
				// and shrink then regrow the file under it
				if err := w.Truncate(int64(22 * mib)); err != nil {
					t.Fatal(err)
				}
				clear(data[22*mib:])
				if err := w.Truncate(int64(32 * mib)); err != nil {
					t.Fatal(err)
				}
			}
			n, err := r.ReadAt(buf, int64(i)*mib)
			if err != nil || n != mib {
				t.Fatalf("read %d: %d %v", i, n, err)
			}
			if !bytes.Equal(buf, data[i*mib:(i+1)*mib]) {
				t.Fatalf("read %d returned stale data", i)
			}
		}
	})

	t.Run("a file shorter than the readahead window", func(t *testing.T) {
		data := pattern(5, 300<<10)
		mustWrite(t, c.path("short"), data)
		for i := 0; i < 3; i++ {
			if !bytes.Equal(mustRead(t, c.path("short")), data) {
				t.Fatal("short file differs")
			}
		}
		// grow it and read again through a fresh descriptor
		f, err := os.OpenFile(c.path("short"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		more := pattern(6, 5<<20)
		if _, err := f.Write(more); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if !bytes.Equal(mustRead(t, c.path("short")), append(data, more...)) {
			t.Fatal("grown file differs")
		}
	})
}

// TestWriteBehindError: a background write refused for lack of space is
// reported by a later write or by close.
func TestWriteBehindError(t *testing.T) {
	c := startCluster(t, "--mem", "16M", "--ssd", "0", "--pfs", "none")
	werr, cerr := writeMiB(t, c.path("big"), 24)
	if werr == nil {
		wantErrno(t, cerr, syscall.ENOSPC, "close after writing past the last tier")
	} else {
		wantErrno(t, werr, syscall.ENOSPC, "write past the last tier")
	}
}
