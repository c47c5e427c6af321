package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/bufpool"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/zerocopy"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Timeout bounds each call, including reconnection attempts, unless the
	// caller's context has an earlier deadline. Default 30 s.
	Timeout time.Duration
	// Name identifies the server in error messages (e.g. "data server 3").
	Name string
	// BulkConns is how many connections carry bulk transfers (default
	// DefaultBulkConns). A file's bulk requests take the same one (by
	// inode); different files' go side by side, each connection read by
	// its own goroutine at either end. Nothing relies on a file's
	// requests keeping their order on it: both servers serve each request
	// in a goroutine of its own, and a mount never has two overlapping
	// writes out at once. Spreading a file's requests over the
	// connections by mebibyte was measured and did not help (the waits
	// are for the CPU behind the sockets; docs/benchmarks.md).
	BulkConns int
	// ByRef, if set, counts the payloads sent by reference (CallPages).
	ByRef *atomic.Int64
}

// DefaultBulkConns is ClientOptions.BulkConns's default. With one, every
// stream through a daemon shared one connection, and its reading
// goroutine copied every byte of them: the aggregate stopped near 3 GB/s
// on a 16-core host whatever the number of streams (issue 18).
const DefaultBulkConns = 4

// Client is a reconnecting, multiplexed connection to one server (the one
// of a list that answers). Many calls
// may be in flight at once; it is safe for concurrent use. Bulk transfers
// travel on a connection of their own, so megabytes of queued payload never
// sit in front of a metadata or small request in one TCP stream.
type Client struct {
	addr   string
	addrs  []string     // addr's comma-separated addresses
	last   atomic.Int64 // index in addrs of the one to dial first
	secret []byte
	opt    ClientOptions

	mu     sync.Mutex    // guards cur, closed
	cur    []*clientConn // by lane: laneSmall, then the bulk lanes
	closed bool
	dialMu sync.Mutex // serialises dials
}

// lanes: one connection for metadata and small I/O, opt.BulkConns for
// bulk I/O.
const laneSmall = 0

func (c *Client) laneOf(m wire.Message) int {
	if wire.Classify(m) == wire.ClassBulk {
		return 1 + int(wire.LaneKey(m)%uint64(c.opt.BulkConns))
	}
	return laneSmall
}

// Sink takes a response's payload straight off the connection, for a
// daemon that relays it without copying it through its memory
// (zerocopy.Relay). prefix holds the payload bytes already buffered; the
// other n-len(prefix) are the next bytes of conn. A Sink must consume
// exactly those or fail; after a failure the connection is dropped. It is
// called only for an answer that is not an error and has a payload.
type Sink func(n int, prefix []byte, conn net.Conn) error

// SinkError is a Sink's failure as CallSink returns it; the call is not
// retried, since the sink may have acted.
type SinkError struct{ Err error }

func (e *SinkError) Error() string { return "relaying a response: " + e.Err.Error() }
func (e *SinkError) Unwrap() error { return e.Err }

type call struct {
	body    *Body // the request's payload, if in a pipe
	pages   bool  // the payload may go by reference (CallPages)
	sink    Sink
	into    []byte
	flags   uint8  // the answer's frame flags
	resp    []byte // the answer's body, encoded
	payload []byte
	kept    bool // the answer said FlagPagesKept
	long    bool // a long poll (LongPoll): the stall watch does not count it
	err     error
	done    chan struct{}
}

type clientConn struct {
	c       net.Conn
	byRef   *atomic.Int64 // ClientOptions.ByRef
	wmu     sync.Mutex    // guards writes on c and scratch
	scratch []byte

	mu      sync.Mutex // guards pending, nextID, err
	pending map[uint64]*call
	nextID  uint64
	err     error // set once the connection is dead
	// recv is when the last frame arrived (unix ns); the stall watch
	// reads it
	recv atomic.Int64
}

// NewClient returns a client for addr, or for the first of a
// comma-separated list of addresses that answers (a service with a
// standby: another is tried when a connection fails). It dials lazily.
func NewClient(addr string, secret []byte, opt ClientOptions) *Client {
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.Name == "" {
		opt.Name = addr
	}
	if opt.BulkConns <= 0 {
		opt.BulkConns = DefaultBulkConns
	}
	return &Client{addr: addr, addrs: strings.Split(addr, ","), secret: secret, opt: opt, cur: make([]*clientConn, 1+opt.BulkConns)}
}

// Addr returns the server address.
func (c *Client) Addr() string { return c.addr }

// Serving returns the address of the list that answered last (the only
// one for a client of one server).
func (c *Client) Serving() string { return c.addrs[c.last.Load()] }

// Name returns the server's name used in errors.
func (c *Client) Name() string { return c.opt.Name }

// Close closes the connection; later calls fail.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	ccs := c.cur
	c.cur = make([]*clientConn, len(ccs))
	c.mu.Unlock()
	for _, cc := range ccs {
		if cc != nil {
			cc.fail(net.ErrClosed)
		}
	}
}

var errClosed = errors.New("client closed")

func (c *Client) conn(ctx context.Context, lane int) (*clientConn, error) {
	c.mu.Lock()
	cc := c.cur[lane]
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if cc != nil {
		return cc, nil
	}
	c.dialMu.Lock()
	defer c.dialMu.Unlock()
	c.mu.Lock()
	cc = c.cur[lane]
	c.mu.Unlock()
	if cc != nil {
		return cc, nil
	}
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if err := clientHandshake(nc, c.secret); err != nil {
		nc.Close()
		return nil, err
	}
	cc = &clientConn{c: nc, pending: map[uint64]*call{}, byRef: c.opt.ByRef}
	cc.recv.Store(time.Now().UnixNano())
	go cc.readLoop()
	if len(c.addrs) > 1 {
		go c.watch(cc)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, errClosed
	}
	c.cur[lane] = cc
	c.mu.Unlock()
	return cc, nil
}

// dial connects to the server: to the address that answered last, else
// to the others in turn (a list names a service's servers, of which one
// listens at a time: the active metadata server).
func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	per := 5 * time.Second
	if len(c.addrs) > 1 {
		per = 2 * time.Second // a host cut off costs this before the next is tried
	}
	var errs []error
	first := int(c.last.Load())
	for i := range c.addrs {
		at := (first + i) % len(c.addrs)
		dctx, cancel := context.WithTimeout(ctx, per)
		nc, err := Dial(dctx, c.addrs[at])
		cancel()
		if err == nil {
			c.last.Store(int64(at))
			return nc, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// Stall detection, for a client of several servers (one of which is to
// be active): a server that is stopped or cut off keeps its connections
// open, and a call on one waits out its timeout. While calls are
// pending and nothing has come back for stallProbe, the client sends a
// probe (an operation no server has: any live server answers it at once,
// from its read loop); if nothing at all comes back for stallDead after
// that, the connection is failed, its calls go to the next server, and
// the next dial starts there.
var (
	stallProbe = time.Second
	stallDead  = 3 * time.Second
)

// opProbe is the probe's operation number: assigned to nothing, so a
// server of any version answers ENOSYS.
const opProbe wire.Op = 0xFFFF

func (c *Client) watch(cc *clientConn) {
	t := time.NewTicker(stallProbe / 4)
	defer t.Stop()
	var probed time.Time // when the probe outstanding went (zero: none)
	for range t.C {
		cc.mu.Lock()
		dead, pending := cc.err != nil, 0
		for _, cl := range cc.pending {
			if !cl.long {
				pending++
			}
		}
		cc.mu.Unlock()
		if dead {
			return
		}
		now := time.Now()
		quiet := now.Sub(time.Unix(0, cc.recv.Load()))
		switch {
		case pending == 0 || quiet < stallProbe:
			probed = time.Time{}
		case probed.IsZero():
			probed = now
			go cc.probe()
		case now.Sub(probed) > stallDead:
			c.last.Store((c.last.Load() + 1) % int64(len(c.addrs)))
			cc.fail(fmt.Errorf("no answer for %v, not even to a probe: the server is stopped or cut off", quiet.Round(time.Millisecond)))
			c.drop(cc)
			return
		}
	}
}

// probe sends the stall watch's probe; its answer, if any, only counts as
// a frame received.
func (cc *clientConn) probe() {
	cl := &call{done: make(chan struct{})}
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.nextID++
	id := cc.nextID
	cc.pending[id] = cl
	cc.mu.Unlock()
	cc.wmu.Lock()
	var err error
	cc.scratch, err = writeFrame(cc.c, cc.scratch, wire.Header{Kind: wire.KindRequest, Op: opProbe, ReqID: id}, &wire.Empty{}, nil, 0)
	cc.wmu.Unlock()
	if err != nil {
		cc.fail(err)
	}
}

func (c *Client) drop(cc *clientConn) {
	c.mu.Lock()
	for i := range c.cur {
		if c.cur[i] == cc {
			c.cur[i] = nil
		}
	}
	c.mu.Unlock()
}

// Invoke sends a request of operation op with an optional payload, waits
// for the answer and decodes it into rep. If into is large enough the
// answer's payload is read into it; otherwise a pooled buffer is
// returned, which the caller may give back with bufpool.Put. A remote
// error comes back as *Error. Connection failures are retried (with a
// fresh connection) until the timeout; they surface as *TransportError
// naming the server.
func (c *Client) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	return c.invoke(ctx, op, req, rep, payload, &call{into: into})
}

// InvokeBody is Invoke with the request's payload in b.
func (c *Client) InvokeBody(ctx context.Context, op wire.Op, req, rep wire.Message, b Body, into []byte) ([]byte, error) {
	return c.invoke(ctx, op, req, rep, nil, &call{into: into, body: &b})
}

// InvokeSink is Invoke for an answer whose payload, if it has one, goes
// to sink, called on the connection's reading goroutine before
// InvokeSink returns. A sink's failure comes back as *SinkError.
func (c *Client) InvokeSink(ctx context.Context, op wire.Op, req, rep wire.Message, payload []byte, sink Sink) error {
	_, err := c.invoke(ctx, op, req, rep, payload, &call{sink: sink})
	return err
}

// InvokePages is Invoke for a payload handed to the kernel by reference
// where the connection allows it (a local unix socket:
// zerocopy.SendPages), saving the process's copy of it into the socket.
// payload must be page-aligned and own its pages whole (a bufpool buffer),
// and stay unchanged until InvokePages returns. After an attempt that
// fails, the connection's queue may still hold references to payload's
// pages: the call goes on with a copy, and payload's pages are detached
// (zerocopy.Detach), so the caller may reuse payload afterwards whatever
// happened, but not read it (it may read as zeroes).
func (c *Client) InvokePages(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	return c.invoke(ctx, op, req, rep, payload, &call{into: into, pages: true})
}

// invoke runs a call and decodes its answer into rep.
func (c *Client) invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload []byte, proto *call) ([]byte, error) {
	flags, body, p, err := c.call(ctx, op, req, payload, proto)
	if err != nil {
		return nil, err
	}
	if flags&wire.FlagError != 0 {
		var st wire.Status
		if err := wire.Decode(body, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", c.opt.Name, err)
		}
		if st.Errno == 0 {
			st.Errno = uint32(syscall.EIO)
		}
		return nil, &Error{Errno: syscall.Errno(st.Errno), Msg: st.Msg}
	}
	if rep != nil {
		if err := wire.Decode(body, rep); err != nil {
			return nil, fmt.Errorf("%s: answer to %v: %w", c.opt.Name, op, err)
		}
	}
	return p, nil
}

// Body is a request payload kept in the kernel: bytes [Off, Off+N) of
// Pipe, sent by reference (zerocopy.Pipe.SendTo) and still there to be
// sent again after a reconnection.
type Body struct {
	Pipe   *zerocopy.Pipe
	Off, N int
}

type retryKey struct{}

// WithRetryLimit bounds how long calls made with the returned context
// retry a server they cannot connect to (or whose connection fails before
// an answer) to d, instead of the whole timeout: for a caller that has
// somewhere else to go, such as another copy of the data.
func WithRetryLimit(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, retryKey{}, d)
}

type longKey struct{}

// LongPoll marks calls made with the returned context as ones a server
// holds until it has something to say (a change feed's watch): the stall
// watch does not count them, so a connection with only such calls
// pending is not probed (one probe a second per mount would add up on a
// metadata server of thousands of mounts). A stall is then found by the
// next other call.
func LongPoll(ctx context.Context) context.Context {
	return context.WithValue(ctx, longKey{}, true)
}

// call runs one call, retrying on fresh connections; proto carries the
// call's into or sink.
func (c *Client) call(ctx context.Context, op wire.Op, req wire.Message, payload []byte, proto *call) (uint8, []byte, []byte, error) {
	ctx, cancel := withTimeout(ctx, c.opt.Timeout)
	defer cancel()
	proto.long, _ = ctx.Value(longKey{}).(bool)
	backoff := 20 * time.Millisecond
	lane := c.laneOf(req)
	var giveUp time.Time
	if d, ok := ctx.Value(retryKey{}).(time.Duration); ok && d > 0 {
		giveUp = time.Now().Add(d)
	}
	if proto.pages {
		defer func() {
			if !proto.pages { // an attempt failed: payload became a copy
				bufpool.Put(payload)
			}
		}()
	}
	for {
		cc, err := c.conn(ctx, lane)
		if err == nil {
			var flags uint8
			var resp, p []byte
			var sent, exposed bool
			flags, resp, p, sent, exposed, err = cc.do(ctx, op, req, payload, proto)
			if err == nil {
				if exposed { // answered, but a relay of it may still read its pages
					_ = zerocopy.Detach(payload)
				}
				return flags, resp, p, nil
			}
			if exposed {
				// the connection's queue may still read payload's
				// pages: go on with a copy, and detach them from ours
				cp := bufpool.Get(len(payload))
				copy(cp, payload)
				_ = zerocopy.Detach(payload)
				payload, proto.pages = cp, false
			}
			c.drop(cc)
			if se := (*SinkError)(nil); errors.As(err, &se) {
				return 0, nil, nil, err
			}
			if sent && ctx.Err() != nil {
				return 0, nil, nil, &TransportError{Server: c.opt.Name, Err: fmt.Errorf("no answer: %w", ctx.Err())}
			}
		}
		if errors.Is(err, ErrAuth) || errors.Is(err, ErrVersion) || errors.Is(err, errClosed) {
			return 0, nil, nil, &TransportError{Server: c.opt.Name, Err: err}
		}
		if !giveUp.IsZero() && time.Now().After(giveUp) {
			return 0, nil, nil, &TransportError{Server: c.opt.Name, Err: fmt.Errorf("unreachable: %v", err)}
		}
		select {
		case <-ctx.Done():
			return 0, nil, nil, &TransportError{Server: c.opt.Name, Err: fmt.Errorf("unreachable: %v", err)}
		case <-time.After(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// do runs one call on one connection. sent reports whether the request may
// have reached the server, exposed whether its payload went by reference
// and something may still read its pages (the call failed, or the answer
// said wire.FlagPagesKept).
func (cc *clientConn) do(ctx context.Context, op wire.Op, req wire.Message, payload []byte, proto *call) (flags uint8, resp, p []byte, sent, exposed bool, err error) {
	cl := &call{into: proto.into, sink: proto.sink, body: proto.body, long: proto.long, done: make(chan struct{})}
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		return 0, nil, nil, false, false, err
	}
	cc.nextID++
	id := cc.nextID
	cc.pending[id] = cl
	cc.mu.Unlock()

	byRef := false
	h := wire.Header{Kind: wire.KindRequest, Op: op, ReqID: id}
	cc.wmu.Lock()
	switch b := proto.body; {
	case b != nil:
		cc.scratch = frameHead(cc.scratch, h, req, b.N)
		if _, err = cc.c.Write(cc.scratch); err == nil {
			err = b.Pipe.SendTo(cc.c, b.Off, b.N)
		}
	case proto.pages && len(payload) >= minByRef && isUnix(cc.c) && zerocopy.Detachable(payload):
		byRef = true
		if cc.byRef != nil {
			cc.byRef.Add(1)
		}
		cc.scratch = frameHead(cc.scratch, h, req, len(payload))
		if _, err = cc.c.Write(cc.scratch); err == nil {
			err = zerocopy.SendPages(cc.c, payload)
		}
	default:
		cc.scratch, err = writeFrame(cc.c, cc.scratch, h, req, payload, 0)
	}
	cc.wmu.Unlock()
	if err != nil {
		cc.fail(err)
		if proto.body != nil {
			proto.body.Pipe.MarkKept()
		}
		return 0, nil, nil, true, byRef, err
	}
	select {
	case <-cl.done:
		if (cl.kept || cl.err != nil) && proto.body != nil {
			proto.body.Pipe.MarkKept() // whoever sent it to us is told in turn
		}
		return cl.flags, cl.resp, cl.payload, true, byRef && (cl.err != nil || cl.kept), cl.err
	case <-ctx.Done():
		cc.mu.Lock()
		_, mine := cc.pending[id]
		delete(cc.pending, id)
		cc.mu.Unlock()
		if !mine {
			// the reader already claimed the call and may be filling
			// into; wait so the caller's buffer is not written after
			// we return.
			<-cl.done
		}
		if proto.body != nil {
			proto.body.Pipe.MarkKept()
		}
		return 0, nil, nil, true, byRef, ctx.Err()
	}
}

// minByRef is the smallest payload CallPages sends by reference: below
// it, the pipe's system calls cost more than the copy.
const minByRef = 64 << 10

func isUnix(c net.Conn) bool {
	_, ok := c.(*net.UnixConn)
	return ok
}

func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
	}
	pending := cc.pending
	cc.pending = map[uint64]*call{}
	cc.mu.Unlock()
	cc.c.Close()
	for _, cl := range pending {
		cl.err = err
		close(cl.done)
	}
}

func (cc *clientConn) readLoop() {
	fr := newFrameReader(cc.c)
	for {
		h, m, err := fr.next()
		cc.recv.Store(time.Now().UnixNano())
		if err == nil && h.Kind != wire.KindResponse {
			err = fmt.Errorf("%w: request frame from server", wire.ErrMalformed)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			cc.fail(err)
			return
		}
		cc.mu.Lock()
		cl := cc.pending[h.ReqID]
		delete(cc.pending, h.ReqID)
		cc.mu.Unlock()
		if cl != nil {
			cl.kept = h.Flags&wire.FlagPagesKept != 0
			cl.flags = h.Flags
		}
		if cl != nil && cl.sink != nil && h.PayloadLen > 0 && h.Flags&wire.FlagError == 0 {
			n := int(h.PayloadLen)
			k := min(fr.r.Buffered(), n)
			prefix, _ := fr.r.Peek(k)
			err := cl.sink(n, prefix, cc.c)
			fr.r.Discard(k)
			if err != nil {
				cl.err = &SinkError{Err: err}
				close(cl.done)
				cc.fail(err)
				return
			}
			cl.resp = m
			close(cl.done)
			continue
		}
		var p []byte
		if h.PayloadLen > 0 {
			n := int(h.PayloadLen)
			if cl != nil && cap(cl.into) >= n {
				p = cl.into[:n]
			} else {
				p = bufpool.Get(n)
			}
			if _, err := io.ReadFull(fr.r, p); err != nil {
				cc.fail(err)
				if cl != nil {
					cl.err = err
					close(cl.done)
				}
				return
			}
			if cl == nil {
				bufpool.Put(p)
			}
		}
		if cl != nil {
			cl.resp, cl.payload = m, p
			close(cl.done)
		}
	}
}
