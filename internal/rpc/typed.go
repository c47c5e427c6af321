package rpc

import (
	"context"
	"fmt"
	"syscall"

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
	h    map[wire.Op]func(ctx context.Context, r *Request)
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
		h(ctx, r)
		return
	}
	r.ReplyErr(Errorf(syscall.ENOSYS, "%s: unsupported operation %v", t.Name, r.Op))
}

func (t *Table) add(op wire.Op, h func(ctx context.Context, r *Request)) {
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
	t.add(d.Op, func(ctx context.Context, r *Request) {
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

// OnRequest serves operation d with f, which answers r itself (a payload
// in or out, a reply sent from the file: Request.ReplySend).
func OnRequest[Q, R any, PQ wire.Ptr[Q], PR wire.Ptr[R]](t *Table, d wire.Def[Q, R], f func(ctx context.Context, r *Request, q PQ)) {
	t.add(d.Op, func(ctx context.Context, r *Request) {
		q, ok := r.Req.(PQ)
		if !ok {
			r.ReplyErr(Errorf(syscall.EINVAL, "%s: %v: request of type %T", t.Name, r.Op, r.Req))
			return
		}
		f(ctx, r, q)
	})
}

// OnMsg serves an operation that still speaks wire.Msg with f.
func OnMsg(t *Table, op wire.Op, f func(ctx context.Context, r *Request)) {
	t.add(op, func(ctx context.Context, r *Request) {
		if r.Msg == nil {
			r.ReplyErr(Errorf(syscall.EINVAL, "%s: %v: request of type %T", t.Name, r.Op, r.Req))
			return
		}
		f(ctx, r)
	})
}
