package rpc

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// fakeHello serves one connection with a hello of version v, and reports
// what the client sent back.
func fakeHello(t *testing.T, hello []byte) (string, chan []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(hello)
		c.SetReadDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	return ln.Addr().String(), got
}

// TestVersionRefused: a server of another major version is refused, at
// once (not retried), with both versions named; so is protocol 1's
// server, which sent no version.
func TestVersionRefused(t *testing.T) {
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	for name, tc := range map[string]struct {
		hello []byte
		want  string
	}{
		"next major": {append(putVersion([]byte(helloMagic), wire.Version{Major: wire.Major + 1, Minor: 4}), nonce...),
			"the server speaks protocol 3.4, this build " + wire.Ours.String()},
		"protocol 1": {append([]byte("SLH1"), nonce...), "the server speaks protocol 1.0, this build " + wire.Ours.String()},
	} {
		addr, _ := fakeHello(t, tc.hello)
		c := NewClient(addr, secret, ClientOptions{Timeout: 10 * time.Second})
		start := time.Now()
		_, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil)
		c.Close()
		if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("%s: refused after %v: retried", name, time.Since(start))
		}
	}
}

// TestMinorVersionAccepted: a server of a later minor version is
// spoken to.
func TestMinorVersionAccepted(t *testing.T) {
	nonce := make([]byte, nonceLen)
	rand.Read(nonce)
	addr, got := fakeHello(t, append(putVersion([]byte(helloMagic), wire.Version{Major: wire.Major, Minor: wire.Minor + 3}), nonce...))
	c := NewClient(addr, secret, ClientOptions{Timeout: 300 * time.Millisecond})
	defer c.Close()
	tcall(context.Background(), c, tPing, &tmsg{}, nil, nil) // the fake never proves itself
	b := <-got
	if len(b) != versionLen+nonceLen+32 || getVersion(b) != wire.Ours {
		t.Fatalf("the client answered %x, want its version, nonce and proof", b)
	}
}

// TestServerRefusesVersion: a client of another major version that holds
// the secret is refused by the server, which says so.
func TestServerRefusesVersion(t *testing.T) {
	s, addr := echoServer(t, echo)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hello := make([]byte, len(helloMagic)+versionLen+nonceLen)
	if _, err := io.ReadFull(c, hello); err != nil {
		t.Fatal(err)
	}
	cn := putVersion(nil, wire.Version{Major: wire.Major + 1})
	cn = append(cn, make([]byte, nonceLen)...)
	c.Write(append(cn, mac(secret, "client", hello[len(helloMagic):], cn)...))
	proof := make([]byte, 32)
	if _, err := io.ReadFull(c, proof); err != nil || [32]byte(proof) != refusedVersion {
		t.Fatalf("server answered %x %v, want the version refusal", proof, err)
	}
	for i := 0; s.AuthFailures.Load() != 1; i++ {
		if i == 100 {
			t.Fatalf("refusals counted: %d", s.AuthFailures.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnknownAndMalformed: a request of an operation the server does not
// know (a later minor version's) gets ENOSYS, one whose body does not
// decode EINVAL; the connection stays up for the next call.
func TestUnknownAndMalformed(t *testing.T) {
	_, addr := echoServer(t, echo)
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	_, err := c.Invoke(context.Background(), wire.Op(65000), &wire.Empty{}, &wire.Empty{}, []byte("payload"), nil)
	if !errors.Is(err, syscall.ENOSYS) || !strings.Contains(err.Error(), "operation 65000 unknown to this server (protocol "+wire.Ours.String()+")") {
		t.Fatalf("unknown operation: %v", err)
	}
	_, err = c.Invoke(context.Background(), tGetattr.Op, rawBody{0xff}, &tmsg{}, nil, nil)
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "test-getattr request") {
		t.Fatalf("malformed body: %v", err)
	}
	resp, p, err := tcall(context.Background(), c, tGetattr, &tmsg{Ino: 7}, []byte("x"), nil)
	if err != nil || resp.Ino != 8 || string(p) != "x" {
		t.Fatalf("call after the refusals: %+v %v", resp, err)
	}
}

// rawBody sends bytes as field 1, which tmsg has as an integer (Ino): a
// body of a known field of the wrong wire type.
type rawBody []byte

func (b rawBody) Fields(c *wire.Codec) {
	e := []byte(b)
	c.Bytes(1, &e)
}

type echoReq struct {
	Name string
	N    uint64
}

func (r *echoReq) Fields(c *wire.Codec) {
	c.String(1, &r.Name)
	c.Uint64(2, &r.N)
}

type echoRep struct {
	Greeting string
	Double   uint64
}

func (r *echoRep) Fields(c *wire.Codec) {
	c.String(1, &r.Greeting)
	c.Uint64(2, &r.Double)
}

var opEcho = wire.Define[echoReq, echoRep](64000, "test-echo", wire.Admin)

// TestTypedTable: a typed operation served from a table and called with
// Do; an operation the table does not serve is ENOSYS naming the server.
func TestTypedTable(t *testing.T) {
	tab := &Table{Name: "test server"}
	On(tab, opEcho, func(ctx context.Context, q *echoReq) (*echoRep, error) {
		if q.Name == "" {
			return nil, Errorf(syscall.ENOENT, "no name")
		}
		return &echoRep{Greeting: "hello " + q.Name, Double: 2 * q.N}, nil
	})
	_, addr := echoServer(t, HandlerFunc(func(r *Request) { go tab.Dispatch(context.Background(), r) }))
	c := NewClient(addr, secret, ClientOptions{})
	defer c.Close()
	rep, err := Do(context.Background(), c, opEcho, &echoReq{Name: "x", N: 21})
	if err != nil || rep.Greeting != "hello x" || rep.Double != 42 {
		t.Fatalf("typed call: %+v %v", rep, err)
	}
	if _, err := Do(context.Background(), c, opEcho, &echoReq{}); !errors.Is(err, syscall.ENOENT) || err.Error() != "no name" {
		t.Fatalf("typed error: %v", err)
	}
	if _, _, err := tcall(context.Background(), c, tPing, &tmsg{}, nil, nil); !errors.Is(err, syscall.ENOSYS) || !strings.Contains(err.Error(), "test server") {
		t.Fatalf("operation not in the table: %v", err)
	}
}
