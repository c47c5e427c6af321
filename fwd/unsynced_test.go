package fwd_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

// sum adds up the values of the series named name whose labels include
// labels (name=value pairs).
func sum(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	v := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				v += m.GetCounter().GetValue()
			case m.Gauge != nil:
				v += m.GetGauge().GetValue()
			}
		}
	}
	return v
}

// TestClosedFilesLeaveNoState: a file written and closed without an
// fsync leaves no state in the forwarding daemon but its data servers
// (unsynced), so an fsync through a later open still syncs them; past
// MaxUnsynced the servers of the files let go are synced in the
// background. Until 2026-12-04 such a file's state stayed for good, and
// the daemon's periodic size and access reports went through every one.
func TestClosedFilesLeaveNoState(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, _ := stackFwd(t, 0, fwd.Config{Metrics: reg, MaxUnsynced: 2})
	ctx := context.Background()
	call := func(op wire.Op, q ns.Request, payload []byte) {
		t.Helper()
		if _, err := c.Invoke(ctx, op, q, wire.SpecOf(op).NewReply(), payload, nil); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
	}
	syncs := func() float64 { return sum(t, reg, "sluice_data_requests_total", "op", "chunk-sync") }
	ino := create(t, c, "f")
	call(ns.OpWrite, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096))
	call(ns.OpFlush, &ns.SizeReq{Ino: ino}, nil)
	call(ns.OpRelease, &ns.InoReq{Ino: ino}, nil)
	if n, u := sum(t, reg, "sluice_fwd_file_states"), sum(t, reg, "sluice_fwd_unsynced_files"); n != 0 || u != 1 {
		t.Fatalf("after the close: %v file states, %v unsynced; want 0 and 1", n, u)
	}
	before := syncs()
	call(ns.OpOpen, &ns.OpenReq{Ino: ino}, nil)
	call(ns.OpFsync, &ns.SizeReq{Ino: ino}, nil)
	if syncs() <= before {
		t.Fatal("an fsync through a later open synced no data server")
	}
	call(ns.OpRelease, &ns.InoReq{Ino: ino}, nil)
	if n, u := sum(t, reg, "sluice_fwd_file_states"), sum(t, reg, "sluice_fwd_unsynced_files"); n != 0 || u != 0 {
		t.Fatalf("after the fsync and close: %v file states, %v unsynced; want none", n, u)
	}
	// five more, two remembered: three synced in the background
	before = syncs()
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		ino := create(t, c, name)
		call(ns.OpWrite, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096))
		call(ns.OpRelease, &ns.InoReq{Ino: ino}, nil)
	}
	if u := sum(t, reg, "sluice_fwd_unsynced_files"); u != 2 {
		t.Fatalf("%v unsynced, want MaxUnsynced (2)", u)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syncs() < before+3 {
		if time.Now().After(deadline) {
			t.Fatalf("%v background syncs, want 3", syncs()-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseDuringWrite: a close that comes while a write of the file is
// under way (another handle's) leaves the state to that write, which
// lets it go when it ends, its data server among the unsynced.
func TestCloseDuringWrite(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, _ := stackFwd(t, 20, fwd.Config{Metrics: reg}) // 20 MB/s: 4 MiB take 200 ms
	ctx := context.Background()
	ino := create(t, c, "f")
	// the chunk placed and written first: the write below is not to a
	// fresh chunk, which would keep the state by itself
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096), nil); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: 4 << 20}, make([]byte, 4<<20), nil)
		wrote <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, _, err := rpc.DoPayload(ctx, c, ns.Release, &ns.InoReq{Ino: ino}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := sum(t, reg, "sluice_fwd_file_states"); n != 1 {
		t.Fatalf("%v file states while the write is under way, want 1", n)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	// its growth goes with the next periodic report (500 ms), then the
	// state
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, u := sum(t, reg, "sluice_fwd_file_states"), sum(t, reg, "sluice_fwd_unsynced_files")
		if n == 0 && u == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the write: %v file states, %v unsynced; want 0 and 1", n, u)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBatchCreatedOpensCount: a file a write-back batch created open
// (ns.CreateBatch, Open) through the daemon counts as open there
// (the open reached the metadata service in the batch, not as an
// OpOpen): another handle's close does not let its state go while the
// batch's handle is open; its state starts from the batch's reply (the
// directory's layout: its first write asks the service for no
// attributes) and is not adopted (an fsync asks the service for no
// layout). Before 2026-12-05 its release counted the other handle's open
// away.
func TestBatchCreatedOpensCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, _ := stackFwd(t, 0, fwd.Config{Metrics: reg})
	ctx := context.Background()
	call := func(op wire.Op, q ns.Request, payload []byte) wire.Message {
		t.Helper()
		rep := wire.SpecOf(op).NewReply()
		if _, err := c.Invoke(ctx, op, q, rep, payload, nil); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		return rep
	}
	const client = 7
	dir := call(ns.OpMkdir, &ns.MkdirReq{Parent: meta.RootIno, Name: "d", Mode: 0o755}, nil).(*ns.EntryRep).Attr.Ino
	grant, err := rpc.Do(ctx, c, ns.Delegate, &ns.DelegateReq{Client: client, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ino, idle := grant.First, grant.First+1
	resp := call(ns.OpCreateBatch, &ns.BatchReq{Head: ns.Head{Client: client}, Parent: dir, Entries: []ns.BatchEntry{
		{Name: "f", Ino: ino, Mode: 0o644, Open: true}, {Name: "idle", Ino: idle, Mode: 0o644, Open: true}}}, nil).(*ns.BatchRep)
	if len(resp.Failed) != 0 {
		t.Fatalf("batch refused %+v", resp.Failed)
	}
	layouts := func() float64 { return sum(t, reg, "sluice_meta_requests_total", "op", "layout") }
	getattrs := func() float64 { return sum(t, reg, "sluice_meta_requests_total", "op", "getattr") }
	states := func() float64 { return sum(t, reg, "sluice_fwd_file_states") }
	if n := states(); n != 2 {
		t.Fatalf("%v file states after the batch, want 2 (both files open)", n)
	}

	before := getattrs()
	call(ns.OpWrite, &ns.IOReq{Ino: ino, Len: 4096}, make([]byte, 4096))
	if n := getattrs() - before; n != 0 {
		t.Fatalf("the first write of a file the batch created asked the service for its attributes %v times", n)
	}
	before = layouts()
	call(ns.OpFsync, &ns.SizeReq{Ino: ino}, nil)
	if n := layouts() - before; n != 0 {
		t.Fatalf("the fsync of a file the batch created asked for its layout %v times: its state was adopted", n)
	}
	call(ns.OpOpen, &ns.OpenReq{Ino: ino}, nil) // a second handle
	call(ns.OpWrite, &ns.IOReq{Ino: ino, Off: 4096, Len: 4096}, make([]byte, 4096))
	call(ns.OpFlush, &ns.SizeReq{Ino: ino}, nil)
	call(ns.OpRelease, &ns.InoReq{Ino: ino}, nil)
	if n := states(); n != 2 {
		t.Fatalf("%v file states after one of two handles of f closed, want 2 (f, idle)", n)
	}
	call(ns.OpRelease, &ns.InoReq{Ino: ino}, nil)
	if n, u := states(), sum(t, reg, "sluice_fwd_unsynced_files"); n != 1 || u != 1 {
		t.Fatalf("after both of f closed: %v file states, %v unsynced; want 1 (idle) and 1", n, u)
	}
	// the file nobody wrote: its close lets its state go
	call(ns.OpRelease, &ns.InoReq{Ino: idle}, nil)
	if n := states(); n != 0 {
		t.Fatalf("%v file states after the idle file closed, want 0", n)
	}
}
