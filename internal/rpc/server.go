package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
)

// Request is one incoming request. The handler must call Reply exactly once,
// from any goroutine; Reply releases Payload.
type Request struct {
	Op wire.Op
	// Req is the request, decoded into its operation's request type
	// (wire.Spec).
	Req     wire.Message
	Payload []byte // request payload; valid until Reply
	// Body holds the payload instead, in the kernel, when the handler
	// took it so (BodyTaker); valid until Reply.
	Body *zerocopy.Pipe
	Peer string
	At   time.Time // when the request was read off the connection
	// Gated is how long the daemon held it at an admission gate (its QoS
	// scheduling), set by the daemon for its own records.
	Gated time.Duration
	id    uint64
	sc    *serverConn
	// local, for a request served in the caller's process (Table.Invoke),
	// takes the answer instead of a connection
	local *localAnswer
}

// PayloadLen is the length of the request's payload, in Payload or Body.
func (r *Request) PayloadLen() int {
	if r.Body != nil {
		return r.Body.Len()
	}
	return len(r.Payload)
}

// release gives back the request's payload.
func (r *Request) release() {
	if r.local != nil {
		return // the caller's
	}
	if r.Payload != nil {
		bufpool.Put(r.Payload)
		r.Payload = nil
	}
	if r.Body != nil {
		r.Body.Release()
		r.Body = nil
		r.sc.srv.bodies.Add(-1)
	}
}

// Reply sends the response and releases the request payload. respPayload is not retained
// after Reply returns. It must not be (part of) r.Payload: the payload's
// buffer is given back first and may be refilled by the next request
// while the answer is written.
func (r *Request) Reply(resp wire.Message, respPayload []byte) {
	r.answer(resp, nil, respPayload)
}

// Answer sends resp, or err (then resp and payload are not sent), and
// releases the request payload, as Reply.
func (r *Request) Answer(resp wire.Message, err error, payload []byte) {
	r.answer(resp, err, payload)
}

func (r *Request) answer(resp wire.Message, err error, payload []byte) {
	if r.local != nil {
		r.local.take(resp, err, payload)
		return
	}
	flags := r.flags()
	r.release()
	f, body := replyBody(resp, err)
	if f != 0 {
		payload = nil
	}
	r.sc.reply(wire.Header{Kind: wire.KindResponse, Flags: flags | f, Op: r.Op, ReqID: r.id}, body, payload)
}

// flags are the response's frame flags: FlagPagesKept if a relay of the
// request's Body failed after sending its pages (zerocopy.Pipe.Kept).
func (r *Request) flags() uint8 {
	if r.Body != nil && r.Body.Kept() {
		return wire.FlagPagesKept
	}
	return 0
}

// ReplySend sends resp with an n-byte payload that send writes straight to
// the connection (sendfile, splice: package zerocopy) under the
// connection's write lock. send must write exactly n bytes; if it fails the
// connection is closed, so that the peer never takes a cut frame for a
// whole one, and the error is returned. Like Reply it releases Payload.
func (r *Request) ReplySend(resp wire.Message, n int, send func(c net.Conn) error) error {
	if r.local != nil {
		return errors.New("rpc: a reply sent from a file has no connection to go on")
	}
	flags := r.flags()
	r.release()
	sc := r.sc
	if sc.dead.Load() {
		return net.ErrClosed
	}
	sc.wmu.Lock()
	sc.scratch = frameHead(sc.scratch, wire.Header{Kind: wire.KindResponse, Flags: flags, Op: r.Op, ReqID: r.id}, resp, n)
	err := writeAll(sc.c, net.Buffers{sc.scratch}, ReplyStall)
	if err == nil {
		// the payload goes in one sendfile or splice: ReplyStall, and
		// a second per MiB (a peer that reads at 1 MiB/s is not cut off)
		sc.c.SetWriteDeadline(time.Now().Add(ReplyStall + time.Duration(n>>20)*time.Second))
		err = send(sc.c)
		sc.c.SetWriteDeadline(time.Time{})
	}
	sc.wmu.Unlock()
	if err != nil {
		sc.fail()
	}
	return err
}

// ReplyErr sends an error response.
func (r *Request) ReplyErr(err error) {
	if err == nil {
		err = errors.New("no error given")
	}
	r.answer(nil, err, nil)
}

// Handler receives requests. Handle must not block for long: it either
// answers at once or queues the request for its own workers.
type Handler interface {
	Handle(r *Request)
}

// BodyTaker is a Handler that takes some requests' payloads as Body (in a
// pipe, received without a copy) rather than as Payload: those it relays
// or writes to a file without reading them.
type BodyTaker interface {
	TakesBody(r *Request) bool
}

// MinBody is the smallest payload taken as a Body (below it a copy costs
// less than the pipe's system calls), and MaxBodies bounds the Bodies a
// server holds at once (two descriptors each).
const (
	MinBody   = 128 << 10
	MaxBodies = 256
)

// HandlerFunc adapts a function of the request to Handler: it must answer
// the request (at once, or from a goroutine of its own).
type HandlerFunc func(r *Request)

// Handle implements Handler.
func (f HandlerFunc) Handle(r *Request) { f(r) }

// Server accepts authenticated connections and hands their requests to a
// Handler.
type Server struct {
	secret []byte
	h      Handler
	log    *slog.Logger

	mu     sync.Mutex // guards ln, conns, closed
	ln     net.Listener
	conns  map[*serverConn]struct{}
	closed bool

	// AuthFailures counts rejected connections (for tests and metrics).
	AuthFailures atomic.Int64
	// Now stamps each request's arrival (Request.At); set it before Serve
	// to the daemon's clock (nil: time.Now).
	Now func() time.Time
	// bodies counts the requests holding a Body.
	bodies atomic.Int64
	// Bodies counts the payloads received as Bodies (for tests and
	// benchmarks: the zero-copy path was taken).
	Bodies atomic.Int64
}

// NewServer returns a server that authenticates with secret.
func NewServer(secret []byte, h Handler, log *slog.Logger) *Server {
	return &Server{secret: secret, h: h, log: log, conns: map[*serverConn]struct{}{}}
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		go s.serveConn(c)
	}
}

// Close stops accepting and closes every connection.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.c.Close()
	}
	s.mu.Unlock()
}

type serverConn struct {
	srv     *Server
	c       net.Conn
	wmu     sync.Mutex // guards writes on c and scratch
	scratch []byte
	dead    atomic.Bool
}

func (s *Server) serveConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if _, err := serverHandshake(c, s.secret); err != nil {
		s.AuthFailures.Add(1)
		if errors.Is(err, ErrAuth) {
			s.log.Warn("rejected connection: wrong cluster secret", "peer", peerName(c))
		} else if errors.Is(err, ErrVersion) {
			s.log.Warn("rejected connection", "peer", peerName(c), "err", err)
		} else {
			s.log.Debug("connection closed during handshake", "peer", peerName(c), "err", err)
		}
		c.Close()
		return
	}
	sc := &serverConn{srv: s, c: c}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return
	}
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	defer func() {
		sc.dead.Store(true)
		c.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
	}()
	fr := newFrameReader(c)
	peer := peerName(c)
	for {
		h, body, err := fr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("closing connection", "peer", peer, "err", err)
			}
			return
		}
		if h.Kind != wire.KindRequest {
			s.log.Warn("closing connection: unexpected frame", "peer", peer, "kind", h.Kind, "op", h.Op)
			return
		}
		req := &Request{Op: h.Op, Peer: peer, id: h.ReqID, sc: sc}
		refusal := s.decode(req, body)
		if h.PayloadLen > 0 {
			if refusal != nil {
				// read past it and answer with the refusal
				if _, err := fr.r.Discard(int(h.PayloadLen)); err != nil {
					return
				}
			} else if err := s.readPayload(fr, c, req, int(h.PayloadLen)); err != nil {
				s.log.Debug("closing connection: reading a payload", "peer", peer, "err", err)
				return
			}
		}
		if refusal != nil {
			req.ReplyErr(refusal)
			continue
		}
		req.At = s.now()
		s.h.Handle(req)
	}
}

// decode fills req's message from body, or returns why the request is
// refused: an operation this build does not know (a peer of a later minor
// version), or a body that does not decode.
func (s *Server) decode(req *Request, body []byte) error {
	spec := wire.SpecOf(req.Op)
	if spec == nil {
		return Errorf(syscall.ENOSYS, "operation %d unknown to this server (protocol %v)", req.Op, wire.Ours)
	}
	m := spec.NewRequest()
	if err := wire.Decode(body, m); err != nil {
		return Errorf(syscall.EINVAL, "%s request: %v", spec.Name, err)
	}
	req.Req = m
	return nil
}

// readPayload reads a request's n payload bytes: into a pipe (Body) if
// the handler takes this request's that way, else into a pooled buffer.
func (s *Server) readPayload(fr *frameReader, c net.Conn, req *Request, n int) error {
	if bt, ok := s.h.(BodyTaker); ok && n >= MinBody && bt.TakesBody(req) {
		if s.bodies.Add(1) <= MaxBodies {
			if p := zerocopy.NewPipe(n); p != nil {
				k := min(fr.r.Buffered(), n)
				prefix, _ := fr.r.Peek(k)
				err := p.Fill(prefix, c, n)
				fr.r.Discard(k)
				if err == nil {
					req.Body = p
					s.Bodies.Add(1)
					return nil
				}
				s.bodies.Add(-1)
				if !errors.Is(err, zerocopy.ErrPipeFull) {
					p.Release()
					return err
				}
				// the bytes that fitted, then the rest from the socket
				req.Payload = bufpool.Get(n)
				err = p.ReadAt(req.Payload[:p.Len()], 0)
				if err == nil {
					_, err = io.ReadFull(fr.r, req.Payload[p.Len():])
				}
				p.Release()
				if err != nil {
					bufpool.Put(req.Payload)
					req.Payload = nil
				}
				return err
			}
		}
		s.bodies.Add(-1)
	}
	req.Payload = bufpool.Get(n)
	if _, err := io.ReadFull(fr.r, req.Payload); err != nil {
		bufpool.Put(req.Payload)
		req.Payload = nil
		return err
	}
	return nil
}

// ReplyStall is how long a reply may make no progress into a peer's
// connection before the connection is closed. A peer that stopped reading
// (cut off the network, or hung) otherwise held every worker that answered
// one of its requests, each waiting its turn at the connection's write
// lock, and the server's other clients waited for workers: a forwarding
// daemon's 16 served a compute node cut off while the other compute
// node's writes waited 7 s. The peer's calls then fail, as they would
// when the connection breaks, and it dials again.
const ReplyStall = 2 * time.Second

func (sc *serverConn) reply(h wire.Header, m wire.Message, payload []byte) {
	if sc.dead.Load() {
		return
	}
	sc.wmu.Lock()
	var err error
	sc.scratch, err = writeFrame(sc.c, sc.scratch, h, m, payload, ReplyStall)
	sc.wmu.Unlock()
	if err != nil {
		sc.fail()
	}
}

// fail closes the connection after a reply could not be sent whole: the
// replies after it are dropped at once (the peer reads no more of this
// connection), rather than each waiting out its own stall.
func (sc *serverConn) fail() {
	sc.dead.Store(true)
	sc.c.Close()
}

// Mux sends each request to the first of Tables that serves its
// operation, in a goroutine of its own; an operation none serves is
// answered ENOSYS.
type Mux struct {
	Name   string // the server, in errors
	Tables []*Table
}

// Handle implements Handler.
func (m *Mux) Handle(r *Request) {
	for _, t := range m.Tables {
		if t.Has(r.Op) {
			go t.Dispatch(context.Background(), r)
			return
		}
	}
	r.ReplyErr(Errorf(syscall.ENOSYS, "%s: unsupported operation %v", m.Name, r.Op))
}
