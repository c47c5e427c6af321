package fwd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/sluice-hpc/sluice/api"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
)

// backend is one data server as seen from this daemon: a connection and
// bounds on requests in flight, so bulk transfers waiting on a slow server
// cannot take the slots small requests need.
//
// A job's chunk request gives its forwarding worker back before it goes
// to the server (releaseWorker) and is bounded per job and class instead
// of per class: what it waits for there is the server's work, not this
// daemon's, and the server shares itself between jobs by its own QoS gate
// and, on a burst buffer, its I/O scheduler. Held, the requests of jobs
// waiting on one server keep every other job out of this daemon: a slow
// server (a PFS that bypassed checkpoints write) sets the pace of writes
// to a fast one, and a scheduled server's waiting jobs keep the job whose
// turn it is from reaching it, so its scheduler hands the turn on at
// every phase gap (docs/bbos.md "I/O scheduler"). Other requests to a
// data server (no job, a migration's) keep their worker and their class's
// bound. (A write also gives its worker back while it waits for its
// chunk's placement: write.go.)
type backend struct {
	c    *rpc.Client
	sem  [wire.NumClasses]chan struct{}
	jobs jobSlots // a job's chunk requests, per job and class
}

func (s *Server) backend(ctx context.Context, id uint64) (*backend, error) {
	s.bmu.Lock()
	b := s.backends[id]
	s.bmu.Unlock()
	if b != nil {
		return b, nil
	}
	resp, err := rpc.Do(ctx, s.meta, api.Servers, &wire.Empty{})
	if err != nil {
		return nil, err
	}
	s.bmu.Lock()
	defer s.bmu.Unlock()
	for _, si := range resp.Servers {
		if si.Role != "data" {
			continue
		}
		if old := s.backends[si.ID]; old != nil && old.c.Addr() == si.Addr {
			continue
		} else if old != nil {
			old.c.Close()
		}
		b := &backend{c: rpc.NewClient(si.Addr, s.cfg.Secret, rpc.ClientOptions{Timeout: s.cfg.Timeout,
			Name: fmt.Sprintf("data server %d (%s, %s)", si.ID, si.Tier, si.Addr)})}
		for i := range b.sem {
			b.sem[i] = make(chan struct{}, s.cfg.BackendInflight)
		}
		s.backends[si.ID] = b
	}
	if b = s.backends[id]; b == nil {
		return nil, rpc.Errorf(syscall.EIO, "data server %d is not registered", id)
	}
	return b, nil
}

// syncData makes file ino's chunks on data server id durable (who: for
// whom, in the server's records and its burst-buffer scheduler).
func (s *Server) syncData(ctx context.Context, id, ino uint64, who wire.Who) error {
	q := &chunk.SyncReq{Ino: ino, Who: who}
	return s.callDataWith(ctx, id, q, func(c *rpc.Client) error {
		_, err := rpc.Do(ctx, c, chunk.Sync, q)
		return err
	})
}

// readData reads a chunk's piece from data server id into into.
func (s *Server) readData(ctx context.Context, id uint64, q *chunk.ReadReq, into []byte) error {
	return s.callDataWith(ctx, id, q, func(c *rpc.Client) error {
		_, _, err := rpc.DoPayload(ctx, c, chunk.Read, q, nil, into)
		return err
	})
}

// writeData writes p at a chunk's piece of data server id.
func (s *Server) writeData(ctx context.Context, id uint64, q *chunk.WriteReq, p payload) error {
	return s.callDataWith(ctx, id, q, func(c *rpc.Client) error {
		var err error
		if p.body == nil {
			_, err = c.Invoke(ctx, chunk.OpWrite, q, &wire.Empty{}, p.b, nil)
		} else {
			_, err = c.InvokeBody(ctx, chunk.OpWrite, q, &wire.Empty{}, rpc.Body{Pipe: p.body, Off: p.off, N: p.n}, nil)
		}
		return err
	})
}

// readDataSink is readData for a read whose answer goes to sink.
func (s *Server) readDataSink(ctx context.Context, id uint64, q *chunk.ReadReq, sink rpc.Sink) error {
	return s.callDataWith(ctx, id, q, func(c *rpc.Client) error {
		return c.InvokeSink(ctx, chunk.OpRead, q, &chunk.ReadRep{}, nil, sink)
	})
}

// callDataWith runs call on data server id's client within the server's
// in-flight bound for m's class (for a job's chunk request: the job's
// bound for the class, the request's worker given back),
// bounded by the timeout (the request has a little more: a write refused
// by a dead server can still move its chunk).
func (s *Server) callDataWith(ctx context.Context, id uint64, q wire.Classed, call func(c *rpc.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	b, err := s.backend(ctx, id)
	if err != nil {
		return err
	}
	class := q.Class()
	sem := b.sem[class]
	if io, ok := q.(chunk.IO); ok && io.Identity().Job != "" && io.Identity().Job != wire.MigrationJob {
		job := io.Identity().Job
		releaseWorker(ctx)
		k := jobClass{job, class}
		sem = b.jobs.get(k, s.cfg.BackendInflight)
		defer b.jobs.put(k)
	}
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return &rpc.TransportError{Server: b.c.Name(), Err: ctx.Err()}
	}
	defer func() { <-sem }()
	err = call(b.c)
	var te *rpc.TransportError
	if errors.As(err, &te) {
		s.log.Error("data server failed", "err", err)
	}
	return err
}

// jobSlots is a bound on requests in flight per job and class, its
// entries kept while a request of the job uses them.
type jobSlots struct {
	mu   sync.Mutex // guards jobs
	jobs map[jobClass]*jobSem
}

type jobClass struct {
	job   string
	class wire.Class
}

type jobSem struct {
	c    chan struct{}
	refs int // callers between get and put
}

// get returns job's semaphore (of n slots); put must follow.
func (j *jobSlots) get(job jobClass, n int) chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.jobs == nil {
		j.jobs = map[jobClass]*jobSem{}
	}
	e := j.jobs[job]
	if e == nil {
		e = &jobSem{c: make(chan struct{}, n)}
		j.jobs[job] = e
	}
	e.refs++
	return e.c
}

func (j *jobSlots) put(job jobClass) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e := j.jobs[job]
	if e.refs--; e.refs == 0 {
		delete(j.jobs, job)
	}
}

// parallel runs fn(0..n-1), concurrently when n > 1, and returns the first
// error.
func (s *Server) parallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = fn(i)
		}(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}
