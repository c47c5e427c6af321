package zerocopy

import (
	"bytes"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (net.Conn, net.Conn) { return pair(t, "tcp") }

// pair returns the two ends of a loopback TCP or a unix connection.
func pair(t *testing.T, network string) (net.Conn, net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		ch <- c
	}()
	a, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-ch
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func randomBytes(n int, seed int64) []byte {
	p := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(p)
	return p
}

// TestSendFile sends ranges of a file, some past its end, from several
// goroutines sharing one descriptor, and checks every byte.
func TestSendFile(t *testing.T) {
	data := randomBytes(3<<20+123, 1)
	path := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := []struct{ off, n int }{
		{0, 1 << 20}, {1, 4096}, {3 << 20, 1 << 20}, {len(data), 100}, {len(data) + 5000, 7}, {12345, 2 << 20},
	}
	var wg sync.WaitGroup
	for i, c := range cases {
		w, r := tcpPair(t)
		want := make([]byte, c.n)
		if c.off < len(data) {
			copy(want, data[c.off:])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := SendFile(w, f, int64(c.off), c.n); err != nil {
				t.Errorf("case %d: %v", i, err)
			}
		}()
		got := make([]byte, c.n)
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d (off %d, n %d): bytes differ", i, c.off, c.n)
		}
	}
	wg.Wait()
	if pos, _ := f.Seek(0, io.SeekCurrent); pos != 0 {
		t.Fatalf("file offset moved to %d", pos)
	}
}

// TestRelay relays frames between TCP connections with and without a
// buffered prefix, and from a source that ends early.
func TestRelay(t *testing.T) {
	for _, nets := range [][2]string{{"tcp", "tcp"}, {"unix", "unix"}, {"tcp", "unix"}, {"unix", "tcp"}} {
		t.Run(nets[0]+"-"+nets[1], func(t *testing.T) { testRelay(t, nets[0], nets[1]) })
	}
}

func testRelay(t *testing.T, srcNet, dstNet string) {
	for _, c := range []struct{ n, prefix int }{{1 << 20, 0}, {1 << 20, 4000}, {100, 100}, {3 << 20, 1}, {5 << 20, 0}} {
		in, src := pair(t, srcNet)
		dst, out := pair(t, dstNet)
		data := randomBytes(c.n, int64(c.n))
		go func() {
			in.Write(data[c.prefix:])
			in.Write([]byte("next"))
		}()
		errc := make(chan error, 1)
		go func() { errc <- Relay(dst, data[:c.prefix], src, c.n) }()
		got := make([]byte, c.n)
		if _, err := io.ReadFull(out, got); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("n %d prefix %d: bytes differ", c.n, c.prefix)
		}
		// the relay stopped at the frame's end: the next bytes are still in src
		next := make([]byte, 4)
		if _, err := io.ReadFull(src, next); err != nil || string(next) != "next" {
			t.Fatalf("after the relay: %q %v", next, err)
		}
	}
	in, src := pair(t, srcNet)
	dst, _ := pair(t, dstNet)
	in.Write([]byte("short"))
	in.Close()
	if err := Relay(dst, nil, src, 100); err != ErrShort {
		t.Fatalf("source ending early: %v, want ErrShort", err)
	}
}

// Sockets of either kind are spliced, not copied through the process.
func TestSpliceTaken(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		in, src := pair(t, network)
		dst, out := pair(t, network)
		data := randomBytes(2<<20, 7)
		go in.Write(data)
		errc := make(chan error, 1)
		go func() {
			done, err := spliceConns(dst, src, int64(len(data)))
			if !done {
				err = io.ErrNoProgress
			}
			errc <- err
		}()
		got := make([]byte, len(data))
		if _, err := io.ReadFull(out, got); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: bytes differ", network)
		}
	}
}
