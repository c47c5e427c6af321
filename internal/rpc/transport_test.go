package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/bufpool"
)

// peerServer serves on ln and reports each request's peer.
func peerServer(t *testing.T, ln net.Listener) (peers func() []string, done chan error) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	// an echo answers with a copy: the request's payload buffer is given
	// back before the answer is written (Reply)
	h := HandlerFunc(func(r *Request) {
		go r.Reply(&tmsg{Size: uint64(len(r.Payload))}, append([]byte(nil), r.Payload...))
	})
	s := NewServer(secret, handlerWithPeer{h, func(p string) { mu.Lock(); seen = append(seen, p); mu.Unlock() }},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	done = make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(s.Close)
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }, done
}

type handlerWithPeer struct {
	h    Handler
	peer func(string)
}

func (h handlerWithPeer) Handle(r *Request) { h.peer(r.Peer); h.h.Handle(r) }

func roundTrip(t *testing.T, addr string) {
	t.Helper()
	c := NewClient(addr, secret, ClientOptions{Timeout: 5 * time.Second})
	defer c.Close()
	payload := bytes.Repeat([]byte("sluice"), 300_000) // past the socket buffers: several turns
	resp, p, err := tcall(context.Background(), c, tWrite, &tmsg{}, payload, nil)
	if err != nil || resp.Size != uint64(len(payload)) || !bytes.Equal(p, payload) {
		t.Fatalf("call to %s: %v", addr, err)
	}
}

// A daemon on a loopback TCP address with the local socket is reached over
// it; its name stays the TCP address; without it, clients fall back to TCP.
func TestLocalSocket(t *testing.T) {
	for _, local := range []bool{true, false} {
		t.Run(fmt.Sprint("local=", local), func(t *testing.T) {
			ln, err := Listen("127.0.0.1:0", ListenOptions{Local: local})
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			if _, _, err := net.SplitHostPort(addr); err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
				t.Fatalf("listener address %q: want the TCP address", addr)
			}
			peers, _ := peerServer(t, ln)
			roundTrip(t, addr)
			roundTrip(t, "tcp://"+addr)
			ps := peers()
			if len(ps) != 2 {
				t.Fatalf("peers %v", ps)
			}
			for _, p := range ps {
				if got := strings.HasPrefix(p, "local pid "); got != local {
					t.Errorf("local socket %v: request from %q", local, p)
				}
			}
		})
	}
}

// A wildcard listener is reached over its local socket through any address
// of the host, and a listener on one loopback address never answers for
// another one's port.
func TestLocalNames(t *testing.T) {
	if got := localName("0.0.0.0:7300"); got != "@sluice-tcp/*:7300" {
		t.Errorf("wildcard: %q", got)
	}
	if got := localName("127.0.0.1:7300"); got != "@sluice-tcp/127.0.0.1:7300" {
		t.Errorf("loopback: %q", got)
	}
	if got := localNames("127.0.0.2:7300"); len(got) != 2 || got[0] != "@sluice-tcp/127.0.0.2:7300" || got[1] != "@sluice-tcp/*:7300" {
		t.Errorf("dial 127.0.0.2: %q", got)
	}
	if got := localNames("192.0.2.1:7300"); got != nil {
		t.Errorf("an address of another host: %q", got)
	}
	ln, err := Listen("0.0.0.0:0", ListenOptions{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	peers, _ := peerServer(t, ln)
	roundTrip(t, net.JoinHostPort("127.0.0.1", port))
	if ps := peers(); len(ps) != 1 || !strings.HasPrefix(ps[0], "local pid ") {
		t.Errorf("wildcard listener's peers %v", ps)
	}
}

// Addresses with a unix scheme listen and dial unix sockets, and the
// listener's address keeps the scheme for the peers it is handed to.
func TestUnixScheme(t *testing.T) {
	for _, a := range []string{
		fmt.Sprintf("unix:@sluice-test-%d", time.Now().UnixNano()),
		"unix://" + t.TempDir() + "/s.sock",
	} {
		ln, err := Listen(a, ListenOptions{Local: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ln.Addr().String(), "unix:") {
			t.Fatalf("%s: listener address %q", a, ln.Addr())
		}
		peerServer(t, ln)
		roundTrip(t, ln.Addr().String())
		roundTrip(t, a)
	}
	if _, err := Listen("carrier-pigeon://x", ListenOptions{}); err == nil {
		t.Error("an unknown scheme listened")
	}
}

// Closing a server stops both of its listeners.
func TestMergedListenerClose(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", ListenOptions{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	s := NewServer(secret, echo, slog.New(slog.NewTextHandler(io.Discard, nil)))
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	roundTrip(t, addr)
	s.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	for _, network := range []string{"tcp", "unix"} {
		a := addr
		if network == "unix" {
			a = localName(addr)
		}
		if c, err := net.DialTimeout(network, a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s %s still accepts after Close", network, a)
		}
	}
}

// bodyRelay takes OpWrite payloads as Bodies and relays parts of them to
// another server with CallBody, as a forwarding daemon does.
type bodyRelay struct {
	to *Client
}

func (h bodyRelay) TakesBody(r *Request) bool { return r.Op == tWrite.Op }

func (h bodyRelay) Handle(r *Request) {
	go func() {
		n := r.PayloadLen()
		var got []byte
		if r.Body != nil {
			// the second half, then the whole, from the same pipe
			for _, part := range [][2]int{{n / 2, n - n/2}, {0, n}} {
				p, err := h.to.InvokeBody(context.Background(), tWrite.Op, &tmsg{Ino: 1}, &tmsg{}, Body{Pipe: r.Body, Off: part[0], N: part[1]}, nil)
				if err != nil {
					r.ReplyErr(err)
					return
				}
				got = append(got, p...)
			}
		} else {
			got = append(append(got, r.Payload[n/2:]...), r.Payload...)
		}
		r.Reply(&tmsg{Size: uint64(n), Flags: boolFlag(r.Body != nil)}, got)
	}()
}

func boolFlag(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Large payloads to a BodyTaker arrive in pipes and are relayed from them
// by reference, any part of them any number of times; small ones arrive
// as bytes; over TCP and over the local socket.
func TestBody(t *testing.T) {
	for _, local := range []bool{true, false} {
		ln, err := Listen("127.0.0.1:0", ListenOptions{Local: local})
		if err != nil {
			t.Fatal(err)
		}
		peerServer(t, ln) // echoes
		relayLn, err := Listen("127.0.0.1:0", ListenOptions{Local: local})
		if err != nil {
			t.Fatal(err)
		}
		to := NewClient(ln.Addr().String(), secret, ClientOptions{Timeout: 5 * time.Second})
		defer to.Close()
		rs := NewServer(secret, bodyRelay{to}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		go rs.Serve(relayLn)
		t.Cleanup(rs.Close)
		c := NewClient(relayLn.Addr().String(), secret, ClientOptions{Timeout: 5 * time.Second})
		defer c.Close()
		var wg sync.WaitGroup
		for i, n := range []int{MinBody - 1, MinBody, 1 << 20, 1<<20 + 12345, 700_000} {
			wg.Add(1)
			go func(i, n int) {
				defer wg.Done()
				payload := make([]byte, n)
				for k := range payload {
					payload[k] = byte(k*7 + i)
				}
				resp, p, err := tcall(context.Background(), c, tWrite, &tmsg{Ino: uint64(i)}, payload, nil)
				if err != nil {
					t.Errorf("local %v n %d: %v", local, n, err)
					return
				}
				want := append(append([]byte(nil), payload[n/2:]...), payload...)
				if !bytes.Equal(p, want) {
					t.Errorf("local %v n %d: relayed bytes differ", local, n)
				}
				// past 1 MiB only where pipes may be larger than
				// pipe-max-size (CAP_SYS_RESOURCE)
				if (resp.Flags == 1) != (n >= MinBody) && n <= 1<<20 {
					t.Errorf("local %v n %d: received as a body: %v", local, n, resp.Flags == 1)
				}
			}(i, n)
		}
		wg.Wait()
		if b := rs.Bodies.Load(); b < 3 {
			t.Errorf("local %v: %d bodies, want 3 or 4", local, b)
		}
		if rs.bodies.Load() != 0 {
			t.Errorf("local %v: %d bodies still held after the replies", local, rs.bodies.Load())
		}
	}
}

// CallPages sends a payload by reference over the local socket, and the
// caller's buffer is detached exactly when something may still read its
// pages after the call: a relay's own send of them failed (the answer
// says wire.FlagPagesKept), or the client's attempt failed (the call then
// goes on with a copy).
func TestCallPages(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", ListenOptions{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	peerServer(t, ln)                                         // echoes
	stalled := localServer(t, handlerOf(func(r *Request) {})) // takes requests, never answers
	relay := func(to string) string {
		c := NewClient(to, secret, ClientOptions{Timeout: 300 * time.Millisecond})
		t.Cleanup(func() { c.Close() })
		return localServer(t, bodyRelay{c})
	}
	call := func(addr string) (buf, want, got []byte, err error) {
		var byRef atomic.Int64
		c := NewClient(addr, secret, ClientOptions{Timeout: 5 * time.Second, ByRef: &byRef})
		defer c.Close()
		buf = bufpool.Get(1 << 20)
		want = randomPayload(len(buf))
		copy(buf, want)
		got, err = c.InvokePages(context.Background(), tWrite.Op, &tmsg{Ino: 3}, &tmsg{}, buf, nil)
		if byRef.Load() == 0 {
			t.Error("the payload did not go by reference")
		}
		return buf, want, got, err
	}

	// answered, nothing kept: the buffer stays as it was
	buf, want, got, err := call(relay(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(append([]byte(nil), want[len(want)/2:]...), want...)) {
		t.Fatal("relayed bytes differ")
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("the buffer was detached although nothing kept its pages")
	}

	// the relay's send stalls and fails: its answer says the pages may
	// still be read, and the buffer is detached
	buf, _, _, err = call(relay(stalled))
	if err == nil {
		t.Fatal("a relay to a stalled server succeeded")
	}
	if !isZero(buf) {
		t.Fatal("the buffer was not detached after the relay's send failed")
	}

	// the client's own attempt fails (the server drops the connection
	// after reading the request): the retry sends a copy, the buffer is
	// detached
	var mu sync.Mutex
	first := true
	drops := localServer(t, handlerOf(func(r *Request) {
		mu.Lock()
		drop := first
		first = false
		mu.Unlock()
		if drop {
			r.sc.c.Close()
			return
		}
		r.Reply(&tmsg{}, append([]byte(nil), r.Payload...))
	}))
	buf, want, got, err = call(drops)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the retried call's bytes differ")
	}
	if !isZero(buf) {
		t.Fatal("the buffer was not detached after a failed attempt")
	}
}

// localServer serves h on a loopback address that also listens on its
// local socket, until the test ends; it returns the address.
func localServer(t *testing.T, h Handler) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", ListenOptions{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(secret, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go s.Serve(ln)
	t.Cleanup(s.Close)
	return ln.Addr().String()
}

type handlerOf func(r *Request)

func (h handlerOf) Handle(r *Request) { h(r) }

func randomPayload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*13 + i>>8 + 1)
	}
	return p
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
