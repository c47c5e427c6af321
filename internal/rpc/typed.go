package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire"
)

// Invoker sends one request of an operation and decodes its answer
// (*Client; a fake in a test).
type Invoker interface {
	Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error)
}

var _ Invoker = (*Client)(nil)

// Do calls operation d with req and returns its reply.
func Do[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](ctx context.Context, c Invoker, d wire.Def[Q, R], req PQ) (PR, error) {
	rep := PR(new(R))
	if _, err := c.Invoke(ctx, d.Op, req, rep, nil, nil); err != nil {
		return nil, err
	}
	return rep, nil
}

// DoPayload is Do for an operation with a payload, either way: payload is
// sent after the request, the answer's lands in into if it fits (else in
// a pooled buffer: bufpool.Put gives it back).
func DoPayload[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](ctx context.Context, c Invoker, d wire.Def[Q, R], req PQ, payload, into []byte) (PR, []byte, error) {
	rep := PR(new(R))
	p, err := c.Invoke(ctx, d.Op, req, rep, payload, into)
	if err != nil {
		return nil, nil, err
	}
	return rep, p, nil
}

// Table dispatches requests to a handler per operation: servers list
// their operations in one table instead of a switch. An operation with no
// handler is answered ENOSYS, naming the server.
type Table struct {
	// Name names the server in errors ("data server 3").
	Name string
	// Observe, if set, is told each request's operation and how long its
	// handler ran (a server's request metrics); set before serving.
	Observe func(op wire.Op, took time.Duration)
	h       map[wire.Op]func(ctx context.Context, r *Request)
}

// Has reports whether the table serves op.
func (t *Table) Has(op wire.Op) bool {
	_, ok := t.h[op]
	return ok
}

// Dispatch runs r's handler in the calling goroutine; the handler
// answers r.
func (t *Table) Dispatch(ctx context.Context, r *Request) {
	if h, ok := t.h[r.Op]; ok {
		if t.Observe == nil {
			h(ctx, r)
			return
		}
		start := time.Now()
		h(ctx, r)
		t.Observe(r.Op, time.Since(start))
		return
	}
	r.ReplyErr(Errorf(syscall.ENOSYS, "%s: unsupported operation %v", t.Name, r.Op))
}

// Add serves operation op with h, which answers the request itself.
func (t *Table) Add(op wire.Op, h func(ctx context.Context, r *Request)) {
	if t.h == nil {
		t.h = map[wire.Op]func(context.Context, *Request){}
	}
	if _, dup := t.h[op]; dup {
		panic(fmt.Sprintf("rpc: %s: operation %v served twice", t.Name, op))
	}
	t.h[op] = h
}

// On serves operation d with f, whose reply or error answers the request.
func On[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](t *Table, d wire.Def[Q, R], f func(ctx context.Context, q PQ) (PR, error)) {
	t.Add(d.Op, func(ctx context.Context, r *Request) {
		q, ok := r.Req.(PQ)
		if !ok {
			r.ReplyErr(Errorf(syscall.EINVAL, "%s: %v: request of type %T", t.Name, r.Op, r.Req))
			return
		}
		rep, err := f(ctx, q)
		if err != nil {
			r.ReplyErr(err)
			return
		}
		r.Reply(rep, nil)
	})
}

// Relay serves operation d by sending each request on to the server
// to returns (a role that runs in a process of its own) and answering
// with its reply or error; an error of to's answers the request.
func Relay[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](t *Table, d wire.Def[Q, R], to func(ctx context.Context) (Invoker, error)) {
	On(t, d, func(ctx context.Context, q PQ) (PR, error) {
		c, err := to(ctx)
		if err != nil {
			return nil, err
		}
		return Do[Q, R, PQ, PR](ctx, c, d, q)
	})
}

// OnRequest serves operation d with f, which answers r itself (a payload
// in or out, a reply sent from the file: Request.ReplySend).
func OnRequest[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](t *Table, d wire.Def[Q, R], f func(ctx context.Context, r *Request, q PQ)) {
	t.Add(d.Op, func(ctx context.Context, r *Request) {
		q, ok := r.Req.(PQ)
		if !ok {
			r.ReplyErr(Errorf(syscall.EINVAL, "%s: %v: request of type %T", t.Name, r.Op, r.Req))
			return
		}
		f(ctx, r, q)
	})
}

// localAnswer is the answer of a request served in the caller's process.
type localAnswer struct {
	once    sync.Once
	done    chan struct{}
	body    []byte // the reply, encoded
	err     error
	payload []byte
}

func (a *localAnswer) take(resp wire.Message, err error, payload []byte) {
	a.once.Do(func() {
		if err == nil && resp != nil {
			a.body = wire.Encode(nil, resp)
		}
		a.err = err
		// the answer's payload may be a buffer its server reuses once
		// the answer is sent: a copy
		a.payload = append([]byte(nil), payload...)
		close(a.done)
	})
}

// Invoke serves a request of the table's in the calling process: the
// handler the operation has over a connection, its answer decoded into
// rep as a client's would be (a *Table is an Invoker: a service called by
// code in its own process, such as a manager, goes through its
// operations as a remote caller does).
func (t *Table) Invoke(ctx context.Context, op wire.Op, req, rep wire.Message, payload, into []byte) ([]byte, error) {
	if !t.Has(op) {
		return nil, Errorf(syscall.ENOSYS, "%s: unsupported operation %v", t.Name, op)
	}
	r := &Request{Op: op, Req: req, Payload: payload, local: &localAnswer{done: make(chan struct{})}}
	r.At = time.Now()
	t.Dispatch(ctx, r)
	a := r.local
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if a.err != nil {
		var re *Error
		if !errors.As(a.err, &re) {
			a.err = &Error{Errno: Errno(a.err), Msg: a.err.Error()}
		}
		return nil, a.err
	}
	if rep != nil {
		if err := wire.Decode(a.body, rep); err != nil {
			return nil, fmt.Errorf("%s: answer to %v: %w", t.Name, op, err)
		}
	}
	if len(a.payload) > 0 && cap(into) >= len(a.payload) {
		return append(into[:0], a.payload...), nil
	}
	return a.payload, nil
}

var _ Invoker = (*Table)(nil)
