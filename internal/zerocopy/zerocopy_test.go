package zerocopy

import (
	"bytes"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/bufpool"
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

// A payload filled into a pipe from a socket (with a prefix already read)
// is sent whole and in parts to sockets, written into a file and read
// back, several times each, and the pipe is reusable after Release.
func TestPipe(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		for _, c := range []struct{ n, prefix int }{{1 << 20, 0}, {1 << 20, 3000}, {4096, 4096}, {300_000, 17}} {
			in, src := pair(t, network)
			data := randomBytes(c.n, int64(c.n+c.prefix))
			go func() {
				in.Write(data[c.prefix:])
				in.Write([]byte("next"))
			}()
			p := NewPipe(c.n)
			if p == nil {
				t.Skip("no pipe of 1 MiB on this system")
			}
			if err := p.Fill(data[:c.prefix], src, c.n); err != nil {
				if err == ErrPipeFull {
					// the socket's pieces took more slots than the
					// pipe has: what is in it is still readable
					got := make([]byte, p.Len())
					if err := p.ReadAt(got, 0); err != nil || !bytes.Equal(got, data[:p.Len()]) {
						t.Fatalf("%s n %d: after ErrPipeFull, the pipe's bytes: %v", network, c.n, err)
					}
					t.Logf("%s n %d prefix %d: %d bytes fitted the pipe", network, c.n, c.prefix, p.Len())
					p.Release()
					continue
				}
				t.Fatalf("%s n %d prefix %d: %v", network, c.n, c.prefix, err)
			}
			// the fill stopped at the payload's end
			next := make([]byte, 4)
			if _, err := io.ReadFull(src, next); err != nil || string(next) != "next" {
				t.Fatalf("after the fill: %q %v", next, err)
			}
			for round := 0; round < 2; round++ {
				for _, r := range [][2]int{{0, c.n}, {c.n / 3, c.n / 2}, {c.n - 1, 1}} {
					dst, out := pair(t, network)
					errc := make(chan error, 1)
					go func() { errc <- p.SendTo(dst, r[0], r[1]) }()
					got := make([]byte, r[1])
					if _, err := io.ReadFull(out, got); err != nil {
						t.Fatal(err)
					}
					if err := <-errc; err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
						t.Fatalf("%s n %d: bytes %d+%d sent differ", network, c.n, r[0], r[1])
					}
					b := make([]byte, r[1])
					if err := p.ReadAt(b, r[0]); err != nil || !bytes.Equal(b, data[r[0]:r[0]+r[1]]) {
						t.Fatalf("%s n %d: ReadAt %d+%d: %v", network, c.n, r[0], r[1], err)
					}
				}
				f, err := os.Create(filepath.Join(t.TempDir(), "f"))
				if err != nil {
					t.Fatal(err)
				}
				if err := p.WriteToFile(f, 5000, 10, c.n-10); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, c.n-10)
				if _, err := f.ReadAt(got, 5000); err != nil || !bytes.Equal(got, data[10:]) {
					t.Fatalf("%s n %d: file bytes differ (%v)", network, c.n, err)
				}
				f.Close()
			}
			if err := p.SendTo(nil, 0, c.n+1); err == nil {
				t.Fatal("a range past the payload was sent")
			}
			p.Release()
		}
	}
}

// A payload larger than a pipe chains more; past the chain's bound the
// fill stops with ErrPipeFull, the bytes that fitted readable and the
// rest still in the socket.
func TestPipeChain(t *testing.T) {
	small := func() *Pipe {
		var fds [2]int
		if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
			t.Fatal(err)
		}
		size, err := fcntl(fds[1], syscall.F_SETPIPE_SZ, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		return &Pipe{segs: []seg{{p: &pipe{r: fds[0], w: fds[1], size: size}}}}
	}
	p := small()
	in, src := pair(t, "unix")
	data := randomBytes(1<<20, 5)
	go in.Write(data)
	if err := p.Fill(data[:1000], nil, 1000); err != nil {
		t.Fatal(err)
	}
	if err := p.Fill(nil, src, len(data)); err != nil {
		t.Fatalf("fill of 1 MiB from a 64 KiB pipe on: %v", err)
	}
	if len(p.segs) < 2 {
		t.Fatalf("%d pipes for 1 MiB past a 64 KiB one", len(p.segs))
	}
	got := make([]byte, len(data)-1000)
	if err := p.ReadAt(got, 1000); err != nil || !bytes.Equal(got, data[:len(got)]) {
		t.Fatalf("reading across the chain: %v", err)
	}
	dst, out := pair(t, "unix")
	errc := make(chan error, 1)
	go func() { errc <- p.SendTo(dst, 50_000, 200_000) }() // across the first pipe's end
	sent := make([]byte, 200_000)
	if _, err := io.ReadFull(out, sent); err != nil || !bytes.Equal(sent, append(data[:1000:1000], data...)[50_000:250_000]) {
		t.Fatalf("sending across the chain: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	p.Release()

	// pipes of 64 KiB: four hold at most 2 MiB (16 pages of up to 32 KiB
	// each)
	drain := func() {
		for {
			select {
			case q := <-bigPipes:
				q.close()
			default:
				return
			}
		}
	}
	drain()
	bigPipe = 64 << 10
	defer func() { drain(); bigPipe = 2 << 20 }()
	p = small()
	in, src = pair(t, "unix")
	big := randomBytes(5<<20, 6)
	go in.Write(big)
	if err := p.Fill(nil, src, len(big)); err != ErrPipeFull {
		t.Fatalf("fill of 5 MiB: %v, want ErrPipeFull", err)
	}
	got = make([]byte, p.Len())
	if err := p.ReadAt(got, 0); err != nil || !bytes.Equal(got, big[:len(got)]) {
		t.Fatalf("the bytes that fitted: %v", err)
	}
	rest := make([]byte, len(big)-len(got))
	if _, err := io.ReadFull(src, rest); err != nil || !bytes.Equal(rest, big[len(got):]) {
		t.Fatalf("the rest in the socket: %v", err)
	}
	p.Release()
}

// TestSendPages sends a payload larger than a pipe by reference over a
// unix socket and checks every byte; then shows that the bytes go by
// reference (a write into the buffer after the send changes what the
// peer reads) and that Detach ends it (the peer reads what was sent).
func TestSendPages(t *testing.T) {
	a, b := pair(t, "unix")
	for _, c := range []net.Conn{a, b} {
		c.(*net.UnixConn).SetWriteBuffer(8 << 20)
		c.(*net.UnixConn).SetReadBuffer(8 << 20)
	}
	big := bufpool.Get(5<<20 + 4096)
	want := randomBytes(len(big), 7)
	copy(big, want)
	got := make([]byte, len(big))
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(b, got); done <- err }()
	if err := SendPages(a, big); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}

	for _, detach := range []bool{false, true} {
		buf := bufpool.Get(256 << 10)
		sent := randomBytes(len(buf), 8)
		copy(buf, sent)
		if err := SendPages(a, buf); err != nil { // queued: b does not read yet
			t.Fatal(err)
		}
		if detach {
			if err := Detach(buf); err != nil {
				t.Fatal(err)
			}
			if buf[0] != 0 || buf[len(buf)-1] != 0 {
				t.Fatal("a detached buffer does not read as zeroes")
			}
		}
		for i := range buf {
			buf[i] = 0xA5
		}
		got := make([]byte, len(buf))
		if _, err := io.ReadFull(b, got); err != nil {
			t.Fatal(err)
		}
		switch {
		case !detach && !bytes.Equal(got, buf):
			t.Fatal("the peer did not read the buffer's pages as they are now: not sent by reference")
		case detach && !bytes.Equal(got, sent):
			t.Fatal("the peer read bytes written after Detach")
		}
	}
	if Detachable(make([]byte, 100)[1:]) {
		t.Fatal("an unaligned slice counts as detachable")
	}
	if err := Detach(make([]byte, 100)[1:]); err == nil {
		t.Fatal("Detach of an unaligned slice did not fail")
	}
}

// SpliceReply puts a reply's header and the whole payload into one splice
// to its target (here a pipe read back; a FUSE device in the mount), and
// leaves the payload in the Pipe; where the payload and header do not fit
// one pipe it writes nothing and says so.
func TestSpliceReply(t *testing.T) {
	if !BigPipes() {
		t.Skip("pipes hold at most 1 MiB here (pipe-max-size, no CAP_SYS_RESOURCE)")
	}
	for _, network := range []string{"unix", "tcp"} {
		for _, c := range []struct{ n, prefix int }{{1 << 20, 0}, {1 << 20, 3000}, {4096, 4096}, {300_000, 17}} {
			in, src := pair(t, network)
			data := randomBytes(c.n, int64(c.n+c.prefix+1))
			go in.Write(data[c.prefix:])
			p := NewPipe(c.n)
			if err := p.Fill(data[:c.prefix], src, c.n); err != nil {
				t.Fatalf("%s n %d: fill: %v", network, c.n, err)
			}
			var fds [2]int
			if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			if _, err := fcntl(fds[1], syscall.F_SETPIPE_SZ, 4<<20); err != nil {
				t.Skip("no 4 MiB pipe to read the reply from")
			}
			head := []byte("sixteen byte hdr")
			ok, err := p.SpliceReply(fds[1], head)
			if !ok || err != nil {
				t.Fatalf("%s n %d: spliced %v, %v", network, c.n, ok, err)
			}
			got := make([]byte, len(head)+c.n)
			if _, err := io.ReadFull(os.NewFile(uintptr(fds[0]), "r"), got); err != nil {
				t.Fatal(err)
			}
			syscall.Close(fds[1])
			if !bytes.Equal(got[:len(head)], head) || !bytes.Equal(got[len(head):], data) {
				t.Fatalf("%s n %d: the reply's bytes differ", network, c.n)
			}
			// the payload stays for another reader
			b := make([]byte, c.n)
			if err := p.ReadAt(b, 0); err != nil || !bytes.Equal(b, data) {
				t.Fatalf("%s n %d: after the reply, ReadAt: %v", network, c.n, err)
			}
			p.Release()
		}
	}
}
