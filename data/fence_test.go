package data_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

var secret = testrig.Secret

func quiet() *slog.Logger { return testrig.Quiet() }

type fenceRig struct {
	t       *testing.T
	svc     *meta.Service
	meta    string
	dir     string
	stop    context.CancelFunc
	c       *rpc.Client
	ino, id uint64
	// tweak, if set, changes the server's configuration before it starts
	tweak func(*data.Config)
}

// start runs the data server (again) on the same directories.
func (r *fenceRig) start() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := data.Config{Kind: "mem", Dir: r.dir, Capacity: 1 << 30, Meta: r.meta, Secret: secret,
		Log: quiet(), StateDir: filepath.Join(r.dir, ".state")}
	if r.tweak != nil {
		r.tweak(&cfg)
	}
	ds, err := data.New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ln, _ := ds.Listen()
	done := make(chan struct{})
	go func() { ds.Run(ctx, ln, filepath.Join(r.dir, ".id")); close(done) }()
	r.stop = func() { cancel(); <-done }
	r.t.Cleanup(r.stop)
	if r.c != nil {
		r.c.Close()
	}
	r.c = rpc.NewClient(ds.Addr(), secret, rpc.ClientOptions{Timeout: 5 * time.Second})
	deadline := time.Now().Add(5 * time.Second)
	for {
		alive := false
		for _, si := range r.svc.Servers() {
			alive = alive || si.Role == "data" && si.Alive && si.Addr == ds.Addr()
			if si.Addr == ds.Addr() {
				r.id = si.ID
			}
		}
		if alive {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatal("data server did not register")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newFenceRig(t *testing.T, tweak ...func(*data.Config)) *fenceRig {
	svc, addr := testrig.Meta(t, meta.Config{ChunkSize: 1 << 20, StripeUnit: 1 << 20,
		Timeout: 2 * time.Second, HeartbeatTTL: 2 * time.Second})
	r := &fenceRig{t: t, svc: svc, meta: addr, dir: t.TempDir()}
	for _, f := range tweak {
		r.tweak = f
	}
	r.start()
	a, err := svc.Create(meta.RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.ino = a.Ino
	if _, _, err := svc.Alloc(context.Background(), r.ino, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *fenceRig) write(gen uint64, off int, p []byte) error {
	_, _, err := rpc.DoPayload(context.Background(), r.c, chunk.Write, &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: r.ino, ChunkSize: 1 << 20},
		Off: uint64(off), Len: uint64(len(p)), Trunc: gen}, Reserve: 1 << 20}, p, nil)
	return err
}

func (r *fenceRig) read(gen uint64, n int) []byte {
	r.t.Helper()
	_, p, err := rpc.DoPayload(context.Background(), r.c, chunk.Read, &chunk.ReadReq{At: chunk.At{ID: chunk.ID{Ino: r.ino, ChunkSize: 1 << 20},
		Len: uint64(n), Trunc: gen}}, nil, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *fenceRig) truncate(size uint64) uint64 {
	r.t.Helper()
	a, err := r.svc.Setattr(context.Background(), &ns.SetattrReq{Ino: r.ino, Mask: ns.SetSize, Size: size})
	if err != nil {
		r.t.Fatal(err)
	}
	return a.Trunc
}

func TestFences(t *testing.T) {
	r := newFenceRig(t)
	x := bytes.Repeat([]byte{'x'}, 8192)
	if err := r.write(0, 0, x); err != nil {
		t.Fatal(err)
	}
	g := r.truncate(100) // the trims reach the server before the reply
	if got := r.read(g, 8192); !bytes.Equal(got[:100], x[:100]) || bytes.Count(got[100:], []byte{0}) != 8092 {
		t.Fatal("bytes past the truncate are still in the chunk")
	}
	// a writer that raced with the truncate is refused and learns it
	if err := r.write(g-1, 0, x); rpc.Errno(err) != syscall.ESTALE {
		t.Fatalf("write of the generation before the truncate: %v", err)
	}
	if err := r.write(g, 200, []byte("yy")); err != nil {
		t.Fatal(err)
	}

	// truncates while the server is down stay pending; the server catches
	// up before it serves the file under the new generation
	r.stop()
	r.svc.Servers() // (the registry notices the missing heartbeats)
	time.Sleep(2100 * time.Millisecond)
	g2 := r.truncate(150)
	g3 := r.truncate(4096)
	if ts, _, _ := r.svc.PendingTrims(r.id, r.ino); len(ts) != 2 {
		t.Fatalf("pending trims while the server is down: %+v", ts)
	}
	r.start()
	// the fence survived the restart: the old generation is still refused
	if err := r.write(g-1, 0, x); rpc.Errno(err) != syscall.ESTALE {
		t.Fatalf("after a restart, a write of a generation older than the fence: %v", err)
	}
	got := r.read(g3, 4096)
	if !bytes.Equal(got[:100], x[:100]) || got[200] != 0 || bytes.Count(got[100:], []byte{0}) != 3996 {
		t.Fatalf("after catching up: bytes past 150 (the trim made while down) are back: %q", got[100:260])
	}
	if ts, _, _ := r.svc.PendingTrims(r.id, r.ino); len(ts) != 0 {
		t.Fatalf("trims still pending after the server caught up: %+v", ts)
	}
	// a resent trim of an applied generation does nothing
	if err := r.write(g3, 1000, []byte("zz")); err != nil {
		t.Fatal(err)
	}
	if _, err := rpc.Do(context.Background(), r.c, chunk.Trunc, &chunk.TruncReq{Ino: r.ino,
		Trims: []wire.Trim{{Ino: r.ino, Idx: 0, Keep: 150, Gen: g2, ChunkSize: 1 << 20}}}); err != nil {
		t.Fatal(err)
	}
	if got := r.read(g3, 4096); !bytes.Equal(got[1000:1002], []byte("zz")) {
		t.Fatal("a resent trim of an applied generation cut a later write")
	}
}
