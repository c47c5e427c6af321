package fwd_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/api"

	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

// tierStack starts a metadata service, nMem mem and nSSD ssd data
// servers and a forwarding daemon in this process.
func tierStack(t *testing.T, nMem, nSSD int) (*meta.Service, *rpc.Client, []*data.Server) {
	t.Helper()
	return tierStackWith(t, nMem, nSSD, fwd.Config{})
}

// tierStackWith is tierStack with the forwarding daemon configured by fc
// (its addresses, secret and logger are filled in).
func tierStackWith(t *testing.T, nMem, nSSD int, fc fwd.Config) (*meta.Service, *rpc.Client, []*data.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	var dss []*data.Server
	for i := 0; i < nMem; i++ {
		dss = append(dss, memServer(t, ctx, metaAddr, 0, nil))
	}
	for i := 0; i < nSSD; i++ {
		dir := t.TempDir()
		ds, err := data.New(data.Config{Kind: "ssd", Dir: dir, Capacity: 1 << 30, Meta: metaAddr, Secret: secret,
			Log: quiet(), StateDir: dir + "/.state"})
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := ds.Listen()
		go ds.Run(ctx, ln, "")
		dss = append(dss, ds)
	}
	c := startFwd(t, ctx, metaAddr, fc)
	testrig.WaitData(t, svc, nMem+nSSD)
	return svc, c, dss
}

func serversOf(svc *meta.Service, tier string) []uint64 {
	var out []uint64
	for _, si := range svc.Servers() {
		if si.Role == "data" && si.Tier == tier {
			out = append(out, si.ID)
		}
	}
	return out
}

// TestMigrationUnderWrites moves every chunk of a file between the mem
// and ssd tiers, back and forth, while writers and truncates keep
// changing it through the forwarding daemon; each operation is applied to
// a model once acknowledged. At the end the file reads back as the model,
// and every chunk is where its last committed migration put it. Stripe
// groups of 1 and 2 members on each side, so the copy restripes.
func TestMigrationUnderWrites(t *testing.T) {
	for _, stripes := range []uint32{1, 2} {
		t.Run(map[uint32]string{1: "unstriped", 2: "striped"}[stripes], func(t *testing.T) {
			testMigrationUnderWrites(t, stripes)
		})
	}
}

func testMigrationUnderWrites(t *testing.T, stripes uint32) {
	ctx := context.Background()
	svc, c, _ := tierStack(t, 2, 2)
	const chunk = 256 << 10
	if _, err := svc.SetLayout(meta.RootIno, chunk, stripes, 64<<10); err != nil {
		t.Fatal(err)
	}
	ino := create(t, c, "f")
	r := rand.New(rand.NewSource(int64(stripes)))
	const fileMax = 6 * chunk
	model := make([]byte, 0, fileMax)
	var mu sync.Mutex // guards model; held across each operation so the model's order is the store's
	var trail []string
	write := func(off, n int) {
		p := make([]byte, n)
		r.Read(p)
		mu.Lock()
		defer mu.Unlock()
		if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Off: uint64(off), Len: uint64(n)}, p, nil); err != nil {
			t.Errorf("write %d+%d: %v", off, n, err)
			return
		}
		if off+n > len(model) {
			model = append(model, make([]byte, off+n-len(model))...)
		}
		copy(model[off:], p)
		trail = append(trail, fmt.Sprintf("write [%d,%d)", off, off+n))
	}
	truncate := func(size int) {
		mu.Lock()
		defer mu.Unlock()
		if _, _, err := rpc.DoPayload(ctx, c, ns.Setattr, &ns.SetattrReq{Ino: ino, Size: uint64(size), Mask: ns.SetSize}, nil, nil); err != nil {
			t.Errorf("truncate %d: %v", size, err)
			return
		}
		trail = append(trail, fmt.Sprintf("truncate %d", size))
		if size < len(model) {
			model = model[:size]
		} else {
			model = append(model, make([]byte, size-len(model))...)
		}
	}
	write(0, fileMax)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer halt()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%25 == 24 {
				truncate(r.Intn(fileMax))
				continue
			}
			off := r.Intn(fileMax - 1)
			write(off, 1+r.Intn(min(fileMax-off, 96<<10)))
		}
	}()
	mem, ssd := serversOf(svc, "mem"), serversOf(svc, "ssd")
	g := int(stripes)
	moved, aborted := 0, 0
	for round := 0; round < 6; round++ {
		to, tier := ssd[:g], "ssd"
		if round%2 == 1 {
			to, tier = mem[:g], "mem"
		}
		locs, err := svc.Layout(ino)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range locs {
			if l.Tier == tier {
				continue
			}
			_, err := svc.MoveChunk(ctx, ino, l.Idx, tier, to)
			mu.Lock()
			trail = append(trail, fmt.Sprintf("move %d to %s %v: %v", l.Idx, tier, to, err))
			mu.Unlock()
			switch {
			case err == nil:
				moved++
			case rpc.Errno(err) == syscall.EAGAIN || rpc.Errno(err) == syscall.ESTALE:
				aborted++ // truncated meanwhile: not moved, stays consistent
			case rpc.Errno(err) == syscall.EINVAL && placedAgain(svc, ino, l):
				aborted++ // cut by a truncate: gone, or placed again on the destination
			default:
				now, _ := svc.Layout(ino)
				mu.Lock()
				tail := strings.Join(trail[max(0, len(trail)-40):], "\n")
				mu.Unlock()
				t.Fatalf("move chunk %d to %s: %v (listed as %+v; layout now %+v)\n%s", l.Idx, tier, err, l, now, tail)
			}
		}
	}
	halt()
	if moved == 0 {
		t.Fatalf("no chunk moved:\n%s", strings.Join(trail, "\n"))
	}
	t.Logf("%d chunk moves committed, %d aborted by truncates", moved, aborted)
	if left, _ := svc.Moves(); len(left) != 0 {
		t.Fatalf("migration intents left behind: %+v", left)
	}
	mu.Lock()
	defer mu.Unlock()
	_, got, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: ino, Len: uint64(len(model) + 4096)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		i := 0
		for i < len(got) && i < len(model) && got[i] == model[i] {
			i++
		}
		j := i
		for j < len(got) && j < len(model) && got[j] != model[j] {
			j++
		}
		zeros := true
		for _, b := range got[i:j] {
			zeros = zeros && b == 0
		}
		locs, _ := svc.Layout(ino)
		t.Logf("DEBUG differs [%d,%d) zeros=%v layout=%+v\n%s", i, j, zeros, locs, strings.Join(trail[max(0, len(trail)-60):], "\n"))
		t.Fatalf("file (%d bytes) differs from the model (%d bytes) from byte %d (chunk %d)", len(got), len(model), i, i/chunk)
	}
}

// TestMovedFenceSurvivesRestart: after a chunk moved away, its source
// refuses requests with the old layout generation (EREMCHG), also after
// the source restarts, and a request with the new generation reaches the
// destination.
func TestMovedFenceSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	dir := t.TempDir()
	start := func(kind, dir string) (*data.Server, context.CancelFunc) {
		cctx, cancel := context.WithCancel(context.Background())
		ds, err := data.New(data.Config{Kind: kind, Dir: dir, Capacity: 1 << 30, Meta: metaAddr, Secret: secret,
			Log: quiet(), StateDir: dir + "/.state"})
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := ds.Listen()
		done := make(chan struct{})
		go func() { ds.Run(cctx, ln, dir+"/.id"); close(done) }()
		return ds, func() { cancel(); <-done }
	}
	src, stopSrc := start("mem", dir)
	dst, stopDst := start("ssd", t.TempDir())
	defer stopDst()
	testrig.WaitData(t, svc, 2)
	a, err := svc.Create(meta.RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	loc, _, err := svc.Alloc(ctx, a.Ino, 0, 0, nil)
	if err != nil || loc.Tier != "mem" {
		t.Fatalf("alloc: %+v %v", loc, err)
	}
	call := func(addr string, op wire.Op, m wire.Message, p, into []byte) error {
		cl := rpc.NewClient(addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second})
		defer cl.Close()
		_, err := cl.Invoke(ctx, op, m, &chunk.ReadRep{}, p, into)
		return err
	}
	payload := bytes.Repeat([]byte("x"), 8192)
	w := &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: a.Ino, ChunkSize: a.ChunkSize}, Len: 8192}, Reserve: uint64(a.ChunkSize)}
	if err := call(src.Addr(), chunk.OpWrite, w, payload, nil); err != nil {
		t.Fatal(err)
	}
	ssd := serversOf(svc, "ssd")
	if _, err := svc.MoveChunk(ctx, a.Ino, 0, "ssd", ssd); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		rd := &chunk.ReadReq{At: chunk.At{ID: chunk.ID{Ino: a.Ino, ChunkSize: a.ChunkSize}, Len: 8192}}
		if err := call(src.Addr(), chunk.OpRead, rd, nil, make([]byte, 8192)); rpc.Errno(err) != syscall.EREMCHG {
			t.Fatalf("read at the old place: %v, want EREMCHG", err)
		}
		if err := call(src.Addr(), chunk.OpWrite, w, payload, nil); rpc.Errno(err) != syscall.EREMCHG {
			t.Fatalf("write at the old place: %v, want EREMCHG", err)
		}
		got := make([]byte, 8192)
		rd.Layout = 1
		if err := call(dst.Addr(), chunk.OpRead, rd, nil, got); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("read at the new place: %v, equal %v", err, bytes.Equal(got, payload))
		}
	}
	check()
	stopSrc()
	src, stopSrc = start("mem", dir)
	defer stopSrc()
	testrig.WaitData(t, svc, 2)
	check()
	if _, err := os.Stat(dir + "/.state/moved"); err != nil {
		t.Fatal(err)
	}
}

// placedAgain reports whether chunk l.Idx of ino was cut by a truncate
// since l was listed: it has another place than l (a newer layout
// generation: written again, placed anew, maybe on the move's
// destination), or it is past the end of the file now (a cut chunk keeps
// its place, trimmed empty, while a migration of it ends or a drop of an
// older copy is owed: meta mayCutLocked; a move of it may then find its
// servers overlapping the destination).
func placedAgain(svc *meta.Service, ino uint64, l wire.ChunkLoc) bool {
	locs, _ := svc.Layout(ino)
	for _, now := range locs {
		if now.Idx == l.Idx {
			return now.Gen > l.Gen
		}
	}
	return true
}

// TestAbortedEvictionKeepsTheHome: an eviction of a drained chunk's cache
// (a clean move to its home on the PFS) that fails — here its source is
// down — must leave the home's copy as it was: the chunk keeps that home,
// and a later eviction makes it the chunk's only copy.
func TestAbortedEvictionKeepsTheHome(t *testing.T) {
	ctx := context.Background()
	svc, metaAddr := testrig.Meta(t, meta.Config{Timeout: 2 * time.Second})
	start := func(kind, dir string) (*data.Server, context.CancelFunc) {
		cctx, cancel := context.WithCancel(context.Background())
		ds, err := data.New(data.Config{Kind: kind, Dir: dir, Capacity: 1 << 30, Meta: metaAddr, Secret: secret,
			Log: quiet(), StateDir: dir + "/.state"})
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := ds.Listen()
		done := make(chan struct{})
		go func() { ds.Run(cctx, ln, dir+"/.id"); close(done) }()
		return ds, func() { cancel(); <-done }
	}
	memDir := t.TempDir()
	src, stopSrc := start("mem", memDir)
	pfs, stopPfs := start("pfs", t.TempDir())
	defer stopPfs()
	testrig.WaitData(t, svc, 2)
	a, err := svc.Create(meta.RootIno, "f", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	loc, _, err := svc.Alloc(ctx, a.Ino, 0, 0, nil)
	if err != nil || loc.Tier != "mem" {
		t.Fatalf("alloc: %+v %v", loc, err)
	}
	call := func(addr string, op wire.Op, m wire.Message, p, into []byte) error {
		cl := rpc.NewClient(addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second})
		defer cl.Close()
		_, err := cl.Invoke(ctx, op, m, &chunk.ReadRep{}, p, into)
		return err
	}
	payload := bytes.Repeat([]byte("home"), 2048)
	w := &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: a.Ino, ChunkSize: a.ChunkSize}, Len: 8192}, Reserve: uint64(a.ChunkSize)}
	if err := call(src.Addr(), chunk.OpWrite, w, payload, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Extend(a.Ino, 8192, 0, 0); err != nil {
		t.Fatal(err)
	}
	home := serversOf(svc, "pfs")
	if _, err := svc.CopyChunk(ctx, a.Ino, 0, home); err != nil {
		t.Fatal(err)
	}
	stopSrc()
	if _, err := svc.EvictChunk(ctx, a.Ino, 0); err == nil {
		t.Fatal("an eviction with its source down succeeded")
	}
	locs, _ := svc.Layout(a.Ino)
	if len(locs) != 1 || len(locs[0].Home) != 1 || locs[0].Home[0] != home[0] {
		t.Fatalf("after the failed eviction the chunk is %+v", locs)
	}
	_, stopSrc = start("mem", memDir)
	defer stopSrc()
	testrig.WaitData(t, svc, 2)
	var n uint64
	for try := 0; ; try++ {
		if n, err = svc.EvictChunk(ctx, a.Ino, 0); err == nil || try > 20 {
			break
		}
		svc.FinishMoves(ctx) // the failed one's ends, owed to the restarted source
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("eviction: %v", err)
	}
	locs, _ = svc.Layout(a.Ino)
	got := make([]byte, 8192)
	rd := &chunk.ReadReq{At: chunk.At{ID: chunk.ID{Ino: a.Ino, ChunkSize: a.ChunkSize}, Len: 8192, Layout: locs[0].Gen}}
	if err := call(pfs.Addr(), chunk.OpRead, rd, nil, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("the home's copy after the evictions (%d bytes copied, chunk %+v) is not the data: %q...", n, locs[0], got[:16])
	}
}

// TestFullServerEmptyChunkMoves: a chunk placed earlier but holding
// nothing (a truncate cut it away while a migration of it was in flight,
// so it kept its place) on a mem server that has filled up since is
// moved by its next write to a tier with room, instead of failing with
// ENOSPC (fsx regression seed …5911). A chunk that holds bytes there is
// not moved: its server fences only an empty chunk (EEXIST otherwise),
// and a write of the old location after the fence is turned away
// (EREMCHG) until the fence is undone.
func TestFullServerEmptyChunkMoves(t *testing.T) {
	ctx := context.Background()
	svc, c, dss := tierStack(t, 1, 1)
	mem := dss[0]
	ino := create(t, c, "f")
	// placed by another writer, nothing written yet
	loc, _, err := svc.Alloc(ctx, ino, 0, 0, nil)
	if err != nil || loc.Tier != "mem" {
		t.Fatalf("alloc: %+v %v", loc, err)
	}
	write := func(addr string, w *chunk.WriteReq, p []byte) error {
		cl := rpc.NewClient(addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second})
		defer cl.Close()
		_, _, err := rpc.DoPayload(ctx, cl, chunk.Write, w, p, nil)
		return err
	}
	fenceAt := func(addr string, f *chunk.FenceReq) (*chunk.FenceRep, error) {
		cl := rpc.NewClient(addr, secret, rpc.ClientOptions{Timeout: 5 * time.Second})
		defer cl.Close()
		return rpc.Do(ctx, cl, chunk.Fence, f)
	}
	// the mem server fills up: no room for a new chunk
	mc := rpc.NewClient(mem.Addr(), secret, rpc.ClientOptions{Timeout: 5 * time.Second})
	defer mc.Close()
	if _, err := rpc.Do(ctx, mc, api.Fault, &api.FaultReq{Kind: api.FaultFill, Value: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte("sluice!!"), 8192)
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Off: 100, Len: uint64(len(p))}, p, nil); err != nil {
		t.Fatalf("write of an empty chunk on a full server: %v", err)
	}
	locs, _ := svc.Layout(ino)
	if len(locs) != 1 || locs[0].Tier != "ssd" || locs[0].Gen != loc.Gen+1 {
		t.Fatalf("chunk not moved to the ssd tier: %+v", locs)
	}
	got := make([]byte, len(p)+100)
	if _, _, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: ino, Len: uint64(len(got))}, nil, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[100:], p) || !bytes.Equal(got[:100], make([]byte, 100)) {
		t.Fatal("read back differs")
	}
	// the old place is fenced: a write there with the old location is
	// turned away
	w := &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: ino, ChunkSize: loc0Size(svc, ino)}, Len: 8, Layout: loc.Gen}, Reserve: 8}
	if err := write(mem.Addr(), w, p[:8]); rpc.Errno(err) != syscall.EREMCHG {
		t.Fatalf("a write of the old location at the fenced server: %v, want EREMCHG", err)
	}

	// a chunk holding bytes is not fenced; an undone fence serves again
	// (on the ssd server, where the chunks go now)
	ssd := dss[1]
	g := create(t, c, "g")
	if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: g, Len: 8}, p[:8], nil); err != nil {
		t.Fatal(err)
	}
	gl, _ := svc.Layout(g)
	if len(gl) != 1 || gl[0].Tier != "ssd" {
		t.Fatalf("g: %+v", gl)
	}
	fence := &chunk.FenceReq{ID: chunk.ID{Ino: g, ChunkSize: loc0Size(svc, g)}, Layout: gl[0].Gen + 1}
	if _, err := fenceAt(ssd.Addr(), fence); rpc.Errno(err) != syscall.EEXIST {
		t.Fatalf("fence of a chunk holding bytes: %v, want EEXIST", err)
	}
	h := create(t, c, "h")
	hl, _, err := svc.Alloc(ctx, h, 0, 0, nil)
	if err != nil || hl.Tier != "ssd" {
		t.Fatalf("alloc h: %+v %v", hl, err)
	}
	fence = &chunk.FenceReq{ID: chunk.ID{Ino: h, ChunkSize: loc0Size(svc, h)}, Layout: hl.Gen + 1}
	r, err := fenceAt(ssd.Addr(), fence)
	if err != nil {
		t.Fatal(err)
	}
	w = &chunk.WriteReq{At: chunk.At{ID: chunk.ID{Ino: h, ChunkSize: fence.ChunkSize}, Len: 8, Layout: hl.Gen}, Reserve: 8}
	if err := write(ssd.Addr(), w, p[:8]); rpc.Errno(err) != syscall.EREMCHG {
		t.Fatalf("write behind a fence: %v, want EREMCHG", err)
	}
	undo := *fence
	undo.Undo, undo.UndoTo = true, r.Before
	if _, err := fenceAt(ssd.Addr(), &undo); err != nil {
		t.Fatal(err)
	}
	if err := write(ssd.Addr(), w, p[:8]); err != nil {
		t.Fatalf("write after the fence was undone: %v", err)
	}
}

func loc0Size(svc *meta.Service, ino uint64) uint32 {
	a, err := svc.Getattr(ino)
	if err != nil {
		return 0
	}
	return a.ChunkSize
}

// TestRelocationWaitsForMigration: a chunk whose server refused its
// first write moves elsewhere (an allocation excluding that server), but
// not while a migration of the chunk is undecided. It used to move at
// once, often to the migration's destination; the migration's commit was
// then refused (the chunk moved meanwhile) and its abort dropped the
// destination's copy, the bytes written there since with it (a run of
// TestHosts read an acknowledged file back as zeros). The allocation now
// answers EAGAIN until the migration ends, and then where it left the
// chunk; a write through the forwarding daemon meanwhile waits for it
// and reads back.
func TestRelocationWaitsForMigration(t *testing.T) {
	ctx := context.Background()
	svc, c, dss := tierStack(t, 1, 1)
	memID, ssdIDs := serversOf(svc, "mem")[0], serversOf(svc, "ssd")
	ino := create(t, c, "f")
	loc, _, err := svc.Alloc(ctx, ino, 0, 0, nil)
	if err != nil || loc.Tier != "mem" {
		t.Fatalf("alloc: %+v %v", loc, err)
	}
	// the mover (the ssd server) holds once the source's session is open
	sc := rpc.NewClient(dss[1].Addr(), secret, rpc.ClientOptions{Timeout: 5 * time.Second})
	defer sc.Close()
	fault := func(kind string) {
		if _, err := rpc.Do(ctx, sc, api.Fault, &api.FaultReq{Kind: kind, Point: "move-begun"}); err != nil {
			t.Fatal(err)
		}
	}
	fault(api.FaultPause)
	moved := make(chan error, 1)
	go func() {
		_, err := svc.MoveChunk(ctx, ino, 0, "ssd", ssdIDs)
		moved <- err
	}()
	waitIntent(t, svc, ino)
	if l, placed, err := svc.Alloc(ctx, ino, 0, 0, []uint64{memID}); rpc.Errno(err) != syscall.EAGAIN {
		t.Fatalf("relocation during a migration: %+v placed %v, %v; want EAGAIN", l, placed, err)
	}
	// a write the mem server refuses (it is full) waits for the migration
	mc := rpc.NewClient(dss[0].Addr(), secret, rpc.ClientOptions{Timeout: 5 * time.Second})
	defer mc.Close()
	if _, err := rpc.Do(ctx, mc, api.Fault, &api.FaultReq{Kind: api.FaultFill, Value: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte("sluice!!"), 8192)
	wrote := make(chan error, 1)
	go func() {
		_, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Len: uint64(len(p))}, p, nil)
		wrote <- err
	}()
	time.Sleep(300 * time.Millisecond)
	fault(api.FaultResume)
	if err := <-moved; err != nil {
		t.Fatalf("migration: %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write during the migration: %v", err)
	}
	locs, _ := svc.Layout(ino)
	if len(locs) != 1 || locs[0].Tier != "ssd" || locs[0].Gen != loc.Gen+1 {
		t.Fatalf("chunk not where the migration put it: %+v", locs)
	}
	if l, placed, err := svc.Alloc(ctx, ino, 0, 0, []uint64{memID}); err != nil || placed || l.Tier != "ssd" {
		t.Fatalf("relocation after the migration: %+v placed %v, %v; want the migration's place", l, placed, err)
	}
	got := make([]byte, len(p))
	if _, _, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: ino, Len: uint64(len(got))}, nil, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, p) {
		t.Fatal("read back differs")
	}
}

// TestRelocationAfterAbortedMigration: once a migration is decided, a
// chunk refused for room moves again, even while the migration's ends
// are not all delivered (a server down), but not onto a server that is
// still owed one: the abort's end drops the destination's copy there.
func TestRelocationAfterAbortedMigration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	memServer(t, ctx, metaAddr, 0, nil)
	ssd := func(ctx context.Context) (*data.Server, chan struct{}) {
		dir := t.TempDir()
		ds, err := data.New(data.Config{Kind: "ssd", Dir: dir, Capacity: 1 << 30, Meta: metaAddr, Secret: secret,
			Log: quiet(), StateDir: dir + "/.state"})
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := ds.Listen()
		ran := make(chan struct{})
		go func() { ds.Run(ctx, ln, ""); close(ran) }()
		return ds, ran
	}
	ssd(ctx)
	// the migration's destination, which holds the copy until the
	// migration's call gives up (its context ends: the ends cannot be
	// sent either, so the destination stays owed one)
	dst, _ := ssd(ctx)
	c := startFwd(t, ctx, metaAddr, fwd.Config{})
	testrig.WaitData(t, svc, 3)
	var dstID uint64
	for _, si := range svc.Servers() {
		if si.Addr == dst.Addr() {
			dstID = si.ID
		}
	}
	memID := serversOf(svc, "mem")[0]
	ino := create(t, c, "f")
	if loc, _, err := svc.Alloc(ctx, ino, 0, 0, nil); err != nil || loc.Tier != "mem" {
		t.Fatalf("alloc: %+v %v", loc, err)
	}
	dc := rpc.NewClient(dst.Addr(), secret, rpc.ClientOptions{Timeout: 5 * time.Second})
	defer dc.Close()
	if _, err := rpc.Do(ctx, dc, api.Fault, &api.FaultReq{Kind: api.FaultPause, Point: "move-begun"}); err != nil {
		t.Fatal(err)
	}
	moved := make(chan error, 1)
	go func() {
		mctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := svc.MoveChunk(mctx, ino, 0, "ssd", []uint64{dstID})
		moved <- err
	}()
	waitIntent(t, svc, ino)
	if err := <-moved; err == nil {
		t.Fatal("the migration committed with its copy held")
	}
	if mis, _ := svc.MovesOf(ino); len(mis) != 1 || mis[0].State != meta.MoveAborted {
		t.Fatalf("want an aborted migration whose end the destination still owes: %+v", mis)
	}
	l, placed, err := svc.Alloc(ctx, ino, 0, 0, []uint64{memID})
	if err != nil || !placed || slices.Contains(l.All(), dstID) || slices.Contains(l.All(), memID) {
		t.Fatalf("relocation after the abort: %+v placed %v, %v; want a place away from %d (owed the abort's drop) and %d", l, placed, err, dstID, memID)
	}
}

// waitIntent waits up to 5 s for file ino's migration intent.
func waitIntent(t *testing.T, svc *meta.Service, ino uint64) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if mis, _ := svc.MovesOf(ino); len(mis) == 1 {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("no migration intent within 5 s")
		}
	}
}
