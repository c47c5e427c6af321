package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

var secret = []byte("test-secret")

func echoServer(t *testing.T, h Handler) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(secret, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go s.Serve(ln)
	t.Cleanup(s.Close)
	return s, ln.Addr().String()
}

func TestCallsInFlight(t *testing.T) {
	_, addr := echoServer(t, echo)
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			payload := bytes.Repeat([]byte{byte(i)}, i*1000)
			into := make([]byte, len(payload))
			resp, p, err := tcall(context.Background(), c, tWrite, &tmsg{Ino: uint64(i)}, payload, into)
			if err != nil || resp.Ino != uint64(i+1) || !bytes.Equal(p, payload) {
				t.Errorf("call %d: %v %+v", i, err, resp)
			}
		}(i)
	}
	wg.Wait()
	_, _, err := tcall(context.Background(), c, tUnlink, &tmsg{Name: "x"}, nil, nil)
	if !errors.Is(err, syscall.ENOENT) || Errno(err) != syscall.ENOENT {
		t.Fatalf("remote error: %v", err)
	}
}

func TestSlowCallDoesNotBlockOthers(t *testing.T) {
	_, addr := echoServer(t, echo)
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	go tcall(context.Background(), c, tFsync, &tmsg{Size: 2000}, nil, nil)
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	if _, _, err := tcall(context.Background(), c, tGetattr, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("fast call waited %v behind a slow one", d)
	}
}

func TestWrongSecret(t *testing.T) {
	s, addr := echoServer(t, echo)
	c := NewClient(addr, []byte("wrong"), ClientOptions{Timeout: 2 * time.Second})
	defer c.Close()
	_, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("want auth error, got %v", err)
	}
	// the server counts it after sending its refusal, which the client
	// may read first
	for start := time.Now(); s.AuthFailures.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 2*time.Second {
			t.Fatal("server did not count the failure")
		}
	}
	// the server keeps serving good clients
	good := NewClient(addr, secret, ClientOptions{})
	defer good.Close()
	if _, _, err := tcall(context.Background(), good, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGarbageClosesConnectionOnly(t *testing.T) {
	_, addr := echoServer(t, echo)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientHandshake(nc, secret); err != nil {
		t.Fatal(err)
	}
	nc.Write(bytes.Repeat([]byte{0xAB}, 100))
	nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("server answered garbage")
	}
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachableTimesOut(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(addr, secret, ClientOptions{Timeout: 500 * time.Millisecond, Name: "data server 7"})
	start := time.Now()
	_, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil)
	var te *TransportError
	if !errors.As(err, &te) || Errno(err) != syscall.EIO {
		t.Fatalf("want transport error, got %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if got := err.Error(); !bytes.Contains([]byte(got), []byte("data server 7")) {
		t.Fatalf("error does not name the server: %s", got)
	}
}

// TestRetryLimit: a caller with somewhere else to go stops retrying an
// unreachable server after its limit, well before the timeout.
func TestRetryLimit(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(addr, secret, ClientOptions{Timeout: 20 * time.Second, Name: "data server 7"})
	start := time.Now()
	_, _, err := tcall(WithRetryLimit(context.Background(), 200*time.Millisecond), c, tPing, &tmsg{}, nil, nil)
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("want transport error, got %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Fatalf("gave up after %v, want about 200ms", d)
	}
}

func TestReconnectAfterRestart(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	s := NewServer(secret, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go s.Serve(ln)
	c := NewClient(addr, secret, ClientOptions{Timeout: 5 * time.Second})
	defer c.Close()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	serveLater(t, addr, 300*time.Millisecond)
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// serveLater starts an echo server at addr after delay (a server
// restarted, or a standby that took over).
func serveLater(t *testing.T, addr string, delay time.Duration) {
	go func() {
		time.Sleep(delay)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		s := NewServer(secret, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(s.Close)
		s.Serve(ln)
	}()
}

// TestStandbyAddresses: a client of a comma-separated list of addresses
// calls whichever listens; when that one goes away, a call in progress
// goes on at another that starts listening (a standby that took over),
// skipping the addresses nothing listens on.
func TestStandbyAddresses(t *testing.T) {
	free := func() string { // an address nothing listens on
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return ln.Addr().String()
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	standby := free()
	s := NewServer(secret, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go s.Serve(ln)
	c := NewClient(free()+","+ln.Addr().String()+","+standby, secret, ClientOptions{Timeout: 10 * time.Second})
	defer c.Close()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	serveLater(t, standby, 500*time.Millisecond)
	start := time.Now()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatalf("after the first went away: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the standby answered after %v", d)
	}
	// an unreachable list names every address
	c2 := NewClient(free()+","+free(), secret, ClientOptions{Timeout: 500 * time.Millisecond})
	defer c2.Close()
	if _, _, err := tcall(context.Background(), c2, tPing, &tmsg{}, nil, nil); err == nil || strings.Count(err.Error(), "127.0.0.1:") < 2 {
		t.Fatalf("no server: %v", err)
	}
}

// TestStalledServer: the active server of a list stops (it completed the
// handshake, then reads and answers nothing, as a process under SIGSTOP
// or a host cut off, whose connections stay open): a call on it does not
// wait out its timeout but goes, after the stall watch's probe gets no
// answer, to the next server, and later calls dial that one first.
func TestStalledServer(t *testing.T) {
	stalled, _ := net.Listen("tcp", "127.0.0.1:0")
	defer stalled.Close()
	go func() {
		for {
			c, err := stalled.Accept()
			if err != nil {
				return
			}
			go func() {
				if _, err := serverHandshake(c, secret); err != nil {
					c.Close()
					return
				}
				// stopped: nothing is read or answered, the connection stays
			}()
		}
	}()
	_, live := echoServer(t, echo)
	c := NewClient(stalled.Addr().String()+","+live, secret, ClientOptions{Timeout: 30 * time.Second})
	defer c.Close()
	start := time.Now()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > stallProbe+stallDead+3*time.Second || d < stallProbe {
		t.Fatalf("the call was answered after %v: want the stall watch's %v + %v and a dial", d, stallProbe, stallDead)
	}
	start = time.Now()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil || time.Since(start) > time.Second {
		t.Fatalf("the next call: %v after %v", err, time.Since(start))
	}
	// a server that is only slow answers the probe: a long call is not cut
	_, slow := echoServer(t, echo)
	c2 := NewClient(slow+","+live, secret, ClientOptions{Timeout: 30 * time.Second})
	defer c2.Close()
	if _, _, err := tcall(context.Background(), c2, tFsync, &tmsg{Size: 6000}, nil, nil); err != nil {
		t.Fatalf("a 6 s call on a live server: %v", err)
	}
}

// TestLongPollNotProbed: a call marked LongPoll, which a server may hold
// until its timeout, does not have the stall watch probe its connection
// (a mount's feed watch would probe its metadata server every second);
// another call on the same stalled server does, and goes on elsewhere.
func TestLongPollNotProbed(t *testing.T) {
	deaf, _ := net.Listen("tcp", "127.0.0.1:0") // reads requests, answers none
	defer deaf.Close()
	var mu sync.Mutex // guards seen
	seen := map[wire.Op]int{}
	go func() {
		for {
			c, err := deaf.Accept()
			if err != nil {
				return
			}
			go func() {
				if _, err := serverHandshake(c, secret); err != nil {
					c.Close()
					return
				}
				fr := newFrameReader(c)
				for {
					h, _, err := fr.next()
					if err != nil {
						return
					}
					mu.Lock()
					seen[h.Op]++
					mu.Unlock()
				}
			}()
		}
	}()
	_, live := echoServer(t, echo)
	c := NewClient(deaf.Addr().String()+","+live, secret, ClientOptions{Timeout: 2500 * time.Millisecond})
	defer c.Close()
	if _, _, err := tcall(LongPoll(context.Background()), c, tPing, &tmsg{}, nil, nil); err == nil {
		t.Fatal("a long poll on a server that answers nothing was answered")
	}
	mu.Lock()
	if seen[opProbe] != 0 || seen[tPing.Op] == 0 {
		t.Fatalf("with a long poll pending: %v (want the call, no probe)", seen)
	}
	mu.Unlock()
	c2 := NewClient(deaf.Addr().String()+","+live, secret, ClientOptions{Timeout: 30 * time.Second})
	defer c2.Close()
	if _, _, err := tcall(context.Background(), c2, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[opProbe] == 0 {
		t.Fatalf("a call on a server that answers nothing went on elsewhere without a probe: %v", seen)
	}
}

// BenchmarkPing measures one request/response round trip over loopback
// TCP: the cost of one hop of the forwarding path.
func BenchmarkPing(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := NewServer(secret, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go s.Serve(ln)
	defer s.Close()
	c := NewClient(ln.Addr().String(), secret, ClientOptions{})
	defer c.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := tcall(ctx, c, tGetattr, &tmsg{Ino: 1}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// streamer answers OpRead with Size bytes of a pattern written by
// ReplySend in three pieces, and anything else like echo. A failed send is
// not its business: the caller checks what arrived, and a client whose sink
// fails closes the connection under it (TestCallSink does so on purpose).
type streamer struct{}

func pattern(ino uint64, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(uint64(i)*7 + ino)
	}
	return p
}

func (streamer) Handle(r *Request) {
	if r.Op != tRead.Op {
		echo.Handle(r)
		return
	}
	go func() {
		m := r.Req.(*tmsg)
		p := pattern(m.Ino, int(m.Size))
		_ = r.ReplySend(&tmsg{Size: m.Size}, len(p), func(c net.Conn) error {
			third := len(p) / 3
			for _, part := range [][]byte{p[:third], p[third : 2*third], p[2*third:]} {
				if _, err := c.Write(part); err != nil {
					return err
				}
			}
			return nil
		})
	}()
}

// TestCallSink mixes calls whose payloads go to a sink with ordinary calls
// on one client, and checks a failing sink: its error comes back, the call
// is not retried and the client goes on working.
func TestCallSink(t *testing.T) {
	_, addr := echoServer(t, streamer{})
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	var wg sync.WaitGroup
	for i := 0; i < 48; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n := 1 + i*40000
			if i%3 == 0 {
				payload := bytes.Repeat([]byte{byte(i)}, n)
				_, p, err := tcall(context.Background(), c, tWrite, &tmsg{Ino: uint64(i)}, payload, nil)
				if err != nil || !bytes.Equal(p, payload) {
					t.Errorf("call %d: %v", i, err)
				}
				return
			}
			var got []byte
			resp := &tmsg{}
			err := c.InvokeSink(context.Background(), tRead.Op, &tmsg{Ino: uint64(i), Size: uint64(n)}, resp, nil,
				func(n int, prefix []byte, conn net.Conn) error {
					got = append(got, prefix...)
					rest := make([]byte, n-len(prefix))
					_, err := io.ReadFull(conn, rest)
					got = append(got, rest...)
					return err
				})
			if err != nil || resp.Size != uint64(n) || !bytes.Equal(got, pattern(uint64(i), n)) {
				t.Errorf("sink call %d: %v, %d bytes", i, err, len(got))
			}
		}(i)
	}
	wg.Wait()
	calls := 0
	err := c.InvokeSink(context.Background(), tRead.Op, &tmsg{Ino: 1, Size: 5000}, &tmsg{}, nil,
		func(int, []byte, net.Conn) error { calls++; return errors.New("downstream gone") })
	var se *SinkError
	if !errors.As(err, &se) || calls != 1 {
		t.Fatalf("failing sink: %v after %d calls, want a SinkError after 1", err, calls)
	}
	if _, _, err := tcall(context.Background(), c, tGetattr, &tmsg{}, nil, nil); err != nil {
		t.Fatalf("after a failed sink: %v", err)
	}
}

// A server that dies in the handshake (after its hello, before its
// proof) is not taken for one that refused the secret: the call tries
// again and succeeds once a real server answers on that address. (A
// forwarding daemon killed and restarted under a mount's write-behind
// once made the write fail for good with "wrong cluster secret?".)
func TestServerGoneInHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		// the first two connections get a hello and are dropped
		for i := 0; i < 2; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write(append(putVersion([]byte(helloMagic), wire.Ours), make([]byte, nonceLen)...))
			io.ReadFull(c, make([]byte, versionLen+nonceLen+32))
			c.Close()
		}
		s := NewServer(secret, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(s.Close)
		s.Serve(ln)
	}()
	c := NewClient(addr, secret, ClientOptions{Timeout: 5 * time.Second})
	defer c.Close()
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
		t.Fatalf("call after the server dropped two handshakes: %v", err)
	}
}

// TestPeerThatStopsReading: a peer that sends requests and reads none of
// the replies (a host cut off the network) has its connection closed once
// a reply made no progress for ReplyStall, so the handlers answering it
// are let go; before, each waited at the connection's write lock for as
// long as the kernel kept the connection, holding a worker of the server.
// Another client is answered meanwhile.
func TestPeerThatStopsReading(t *testing.T) {
	s, addr := echoServer(t, echo)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := clientHandshake(nc, secret); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{7}, 1<<20)
	go func() {
		var scratch []byte
		for i := uint64(1); i <= 64; i++ {
			var err error
			scratch, err = writeFrame(nc, scratch, wire.Header{Kind: wire.KindRequest, Op: tWrite.Op, ReqID: i}, &tmsg{Ino: i}, payload, 0)
			if err != nil {
				return
			}
		}
	}()
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	start := time.Now()
	for {
		if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 1 { // the good client's only
			break
		}
		if time.Since(start) > ReplyStall+25*time.Second { // (never, before)
			t.Fatalf("the connection of a peer that reads nothing is still open after %v", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("closed %v after the peer stopped reading", time.Since(start).Round(time.Millisecond))
}
