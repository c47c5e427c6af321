package vfs

import (
	"bytes"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// ownedBed is a createBed whose creates are owned; promotions are logged
// in order with the metadata service's requests.
type ownedBed struct {
	*createBed
	own *Owned

	mu       sync.Mutex
	promoted []any
	block    chan struct{} // promotions wait on it when set
}

func newOwnedBed(t *testing.T, maxFile, budget int64) *ownedBed {
	b := &ownedBed{createBed: newCreateBed(time.Hour)}
	b.own = NewOwned(OwnedConfig{MaxFile: maxFile, Budget: budget, Promote: func(ino uint64, tag any) bool {
		b.mu.Lock()
		block := b.block
		b.mu.Unlock()
		if block != nil {
			<-block
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		// the file's create must have reached the service first
		if len(b.meta.sent()) == 0 {
			t.Errorf("inode %d promoted before its create was sent", ino)
		}
		b.promoted = append(b.promoted, tag)
		return true
	}})
	b.w.cfg.Owned = b.own
	return b
}

func (b *ownedBed) write(t *testing.T, ino, off uint64, data string) {
	t.Helper()
	b.own.BeginWrite(ino)
	b.own.EndWrite(ino, off, []byte(data), true)
}

func (b *ownedBed) read(ino, off uint64, n int) (string, bool) {
	buf := make([]byte, n)
	got, ok := b.own.Read(ino, off, buf)
	return string(buf[:got]), ok
}

func (b *ownedBed) promotions() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]any(nil), b.promoted...)
}

// A file created here is owned: the batch says so; its bytes are read
// back here once no handle may write, and a read-only open of it needs no
// release at the service; writes through a second writer handle keep it
// current.
func TestOwnedReadBack(t *testing.T) {
	b := newOwnedBed(t, 1<<10, 1<<20)
	ino, ok := b.create(t, "a", 500)
	if !ok || !b.own.Owns(ino) {
		t.Fatal("a file created here is not owned")
	}
	b.own.Track(ino, 1, true)
	b.write(t, ino, 0, "hello")
	b.write(t, ino, 3, "p, world")
	if _, ok := b.read(ino, 0, 64); ok {
		t.Fatal("read answered here while a writer is open")
	}
	if b.own.OpenLocal(ino, 2, nil) {
		t.Fatal("read-only open answered here while a writer is open")
	}
	if !b.own.Release(1) {
		t.Fatal("a writer's release must go to the service")
	}
	if !b.own.OpenLocal(ino, 2, "tag2") {
		t.Fatal("read-only open of an owned file not answered here")
	}
	for _, c := range []struct {
		off  uint64
		n    int
		want string
	}{{0, 64, "help, world"}, {5, 3, " wo"}, {11, 4, ""}, {100, 4, ""}} {
		if got, ok := b.read(ino, c.off, c.n); !ok || got != c.want {
			t.Fatalf("read %d@%d = %q %v, want %q", c.n, c.off, got, ok, c.want)
		}
	}
	// a second writer (opened at the service) and a write past the end:
	// the gap reads as zeros
	b.own.Track(ino, 3, true)
	b.write(t, ino, 14, "!")
	b.own.Release(3)
	if got, _ := b.read(ino, 0, 64); got != "help, world\x00\x00\x00!" {
		t.Fatalf("after the second writer: %q", got)
	}
	if b.own.Release(2) {
		t.Fatal("the release of an open answered here went to the service")
	}
	b.w.flush(10)
	bs := b.meta.sent()
	if len(bs) != 1 || !bs[0].Entries[0].Owned {
		t.Fatalf("batch %+v: the create must say the file is owned", bs)
	}
	if b.own.Bytes() != 15 {
		t.Fatalf("owned bytes %d, want 15", b.own.Bytes())
	}
}

// A recall gives the directory's owned files up before the delegation
// goes back: each read-only open answered here is opened at the service
// (after the file's create), reads go to the forwarding node, and the
// handle's release then goes to the service too.
func TestOwnedRecall(t *testing.T) {
	b := newOwnedBed(t, 1<<10, 1<<20)
	ino, _ := b.create(t, "a", 500)
	b.write(t, ino, 0, "x")
	if !b.own.OpenLocal(ino, 7, "seven") {
		t.Fatal("not opened here")
	}
	b.w.Recall([]ns.Change{{Kind: ns.ChangeRecall, Holder: b.dc.ID(), Ino: 10}})
	b.meta.waitOp(t, ns.OpUndelegate)
	if p := b.promotions(); len(p) != 1 || p[0] != "seven" {
		t.Fatalf("promotions before the delegation went back: %v", p)
	}
	if b.own.Owns(ino) || b.own.Len() != 0 || b.own.Bytes() != 0 {
		t.Fatal("still owned after the recall")
	}
	if _, ok := b.read(ino, 0, 8); ok {
		t.Fatal("read answered here after the recall")
	}
	if !b.own.Release(7) {
		t.Fatal("the release of a promoted open must go to the service")
	}
}

// A release that races a promotion waits for it, so that the service sees
// the open before the release.
func TestOwnedReleaseDuringPromotion(t *testing.T) {
	b := newOwnedBed(t, 1<<10, 1<<20)
	ino, _ := b.create(t, "a", 500)
	b.w.flush(10)
	b.own.OpenLocal(ino, 1, "one")
	b.mu.Lock()
	b.block = make(chan struct{})
	b.mu.Unlock()
	disowned := make(chan struct{})
	go func() { b.own.Disown(ino); close(disowned) }()
	for b.own.Owns(ino) {
		time.Sleep(time.Millisecond)
	}
	released := make(chan bool)
	go func() { released <- b.own.Release(1) }()
	select {
	case <-released:
		t.Fatal("release returned while the open was being promoted")
	case <-time.After(50 * time.Millisecond):
	}
	close(b.block)
	if !<-released {
		t.Fatal("release of a promoted open not sent to the service")
	}
	<-disowned
}

// What ends ownership: two writes at once, a failed write, growing past
// the file or the budget limit, a name removed, a refused create (whose
// local opens are not promoted: the file does not exist at the service).
func TestOwnedLimits(t *testing.T) {
	b := newOwnedBed(t, 16, 24)
	var inos []uint64
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		ino, ok := b.create(t, n, 500)
		if !ok || !b.own.Owns(ino) {
			t.Fatalf("%s not owned", n)
		}
		inos = append(inos, ino)
	}
	a, c, d, e, f := inos[0], inos[2], inos[3], inos[4], inos[5]
	// two writes at once
	b.own.BeginWrite(a)
	b.own.BeginWrite(a)
	b.own.EndWrite(a, 0, []byte("1"), true)
	b.own.EndWrite(a, 1, []byte("2"), true)
	if b.own.Owns(a) {
		t.Fatal("owned after two writes at once")
	}
	// a failed write
	b.own.BeginWrite(inos[1])
	b.own.EndWrite(inos[1], 0, []byte("x"), false)
	if b.own.Owns(inos[1]) {
		t.Fatal("owned after a failed write")
	}
	// past the file limit (16)
	b.write(t, c, 0, "0123456789abcdef")
	if !b.own.Owns(c) {
		t.Fatal("a file at the limit not owned")
	}
	b.write(t, c, 16, "g")
	if b.own.Owns(c) {
		t.Fatal("owned past the file limit")
	}
	// past the budget (24): d takes 16, e may take 8 more; d held open
	b.write(t, d, 0, "0123456789abcdef")
	b.write(t, e, 0, "01234567")
	if !b.own.Owns(e) || b.own.Bytes() != 24 {
		t.Fatalf("within the budget: owned %v, %d bytes", b.own.Owns(e), b.own.Bytes())
	}
	if !b.own.OpenLocal(d, 9, "nine") {
		t.Fatal("d not opened here")
	}
	// e's ninth byte: the oldest idle files go first (f, empty), d is
	// held open, e is being written: e is disowned
	b.write(t, e, 8, "8")
	if b.own.Owns(e) || b.own.Owns(f) || !b.own.Owns(d) || b.own.Bytes() != 16 {
		t.Fatalf("past the budget: e owned %v, f %v, d %v, %d bytes", b.own.Owns(e), b.own.Owns(f), b.own.Owns(d), b.own.Bytes())
	}
	// the budget full again (d 16, g 8): h's birth lets the oldest idle
	// file go (g; d is open), and h is owned
	g, _ := b.create(t, "g", 500)
	b.write(t, g, 0, "abcdefgh")
	h, ok := b.create(t, "h", 500)
	if !ok || !b.own.Owns(h) || b.own.Owns(g) || !b.own.Owns(d) || b.own.Len() != 2 || b.own.Bytes() != 16 {
		t.Fatalf("a birth past the budget: h owned %v, g %v, d %v; %d files, %d bytes", b.own.Owns(h), b.own.Owns(g), b.own.Owns(d), b.own.Len(), b.own.Bytes())
	}
	if r, ok := b.read(g, 0, 8); ok {
		t.Fatalf("a file let go is read here: %q", r)
	}
	// a name removed
	b.w.flush(10)
	b.own.DisownName(10, "d")
	if b.own.Owns(d) || len(b.promotions()) != 1 {
		t.Fatalf("after its unlink: owned %v, promotions %v", b.own.Owns(d), b.promotions())
	}
	// a refused create
	b.own.OpenLocal(h, 11, "eleven")
	b.own.Forget(h)
	if b.own.Owns(h) || len(b.promotions()) != 1 || b.own.Release(11) {
		t.Fatal("a forgotten file's local open was promoted or released at the service")
	}
	if b.own.Len() != 0 || b.own.Bytes() != 0 {
		t.Fatalf("%d files, %d bytes left", b.own.Len(), b.own.Bytes())
	}
}

// MaxFiles bounds the files owned: the oldest idle ones go, busy ones
// (a write under way, a close on its way) stay, and a birth with every
// owned file busy is not owned. The line of files by age does not grow
// with files disowned otherwise.
func TestOwnedEvictsOldest(t *testing.T) {
	b := newOwnedBed(t, 16, 1<<20)
	b.own.cfg.MaxFiles = 3
	var inos []uint64
	for i := 0; i < 3; i++ {
		ino, _ := b.create(t, "f"+strconv.Itoa(i), 500)
		inos = append(inos, ino)
	}
	b.own.BeginWrite(inos[0]) // busy: a write under way
	done, ok := b.own.DeferClose(inos[1])
	if !ok {
		t.Fatal("close not deferred")
	}
	x, _ := b.create(t, "x", 500)
	if !b.own.Owns(x) || !b.own.Owns(inos[0]) || !b.own.Owns(inos[1]) || b.own.Owns(inos[2]) {
		t.Fatalf("after a birth at the limit: owned %v %v %v, new %v (want the idle f2 gone)",
			b.own.Owns(inos[0]), b.own.Owns(inos[1]), b.own.Owns(inos[2]), b.own.Owns(x))
	}
	b.own.BeginWrite(x)
	y, _ := b.create(t, "y", 500)
	if b.own.Owns(y) || b.own.Len() != 3 {
		t.Fatalf("a birth with every owned file busy: owned %v, %d files", b.own.Owns(y), b.own.Len())
	}
	b.own.EndWrite(x, 0, []byte("x"), true)
	b.own.EndWrite(inos[0], 0, []byte("0"), true)
	done()
	// busy files went to the back of the line as they were passed over;
	// idle again, one of them goes
	z, _ := b.create(t, "z", 500)
	if !b.own.Owns(z) || b.own.Len() != 3 {
		t.Fatalf("once idle again: z owned %v, %d files", b.own.Owns(z), b.own.Len())
	}
	// idle files go oldest first
	var more []uint64
	for i := 0; i < 4; i++ {
		ino, _ := b.create(t, "m"+strconv.Itoa(i), 500)
		more = append(more, ino)
	}
	if b.own.Owns(z) || b.own.Owns(more[0]) || !b.own.Owns(more[1]) || !b.own.Owns(more[2]) || !b.own.Owns(more[3]) {
		t.Fatalf("four births at the limit of 3: z %v, m0–m3 %v %v %v %v, want m1–m3 owned", b.own.Owns(z),
			b.own.Owns(more[0]), b.own.Owns(more[1]), b.own.Owns(more[2]), b.own.Owns(more[3]))
	}
	// files born and disowned by their unlink, many times over
	b.own.cfg.MaxFiles = 1 << 16
	b.w.flush(10)
	for i := 0; i < 1200; i++ { // the line is kept once 1,024 are gone
		name := "u" + strconv.Itoa(i)
		if _, ok := b.create(t, name, 500); !ok {
			t.Fatal("create not answered here")
		}
		b.own.DisownName(10, name)
	}
	b.own.mu.Lock()
	line := len(b.own.age) - b.own.head
	b.own.mu.Unlock()
	if line > 2*b.own.Len()+1024+1 {
		t.Fatalf("%d inodes in the line by age for %d files owned", line, b.own.Len())
	}
}

// Reads here return what a model of the file says after any sequence of
// writes at random offsets (holes read as zeros).
func TestOwnedModel(t *testing.T) {
	b := newOwnedBed(t, 4096, 1<<20)
	ino, _ := b.create(t, "m", 500)
	var model []byte
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := seed
	next := func(n uint64) uint64 { r = r*6364136223846793005 + 1442695040888963407; return (r >> 33) % n }
	for i := 0; i < 500; i++ {
		off, n := next(3000), next(100)+1
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(next(256))
		}
		b.write(t, ino, off, string(data))
		if end := off + n; end > uint64(len(model)) {
			model = append(model, make([]byte, end-uint64(len(model)))...)
		}
		copy(model[off:], data)
		roff, rn := next(3200), int(next(300))
		buf := make([]byte, rn)
		got, ok := b.own.Read(ino, roff, buf)
		var want []byte
		if roff < uint64(len(model)) {
			want = model[roff:min(uint64(len(model)), roff+uint64(rn))]
		}
		if !ok || !bytes.Equal(buf[:got], want) {
			t.Fatalf("seed %d step %d: read %d@%d = %d bytes %v, want %d", seed, i, rn, roff, got, ok, len(want))
		}
	}
}

// A close on its way (DeferClose) keeps the file owned: a recall, a
// disown and WaitClosed wait for its report, MaxClosing bounds how many
// are on their way, and a file forgotten (its create refused) releases
// whoever waits.
func TestOwnedDeferredClose(t *testing.T) {
	b := newOwnedBed(t, 1<<10, 1<<20)
	b.own.cfg.MaxClosing = 2
	ino, _ := b.create(t, "a", 500)
	b.write(t, ino, 0, "x")
	done, ok := b.own.DeferClose(ino)
	if !ok || b.own.Closing() != 1 {
		t.Fatal("close of an owned file not deferred")
	}
	if _, ok := b.own.DeferClose(ino + 100); ok {
		t.Fatal("close of a file not owned deferred")
	}
	done2, ok := b.own.DeferClose(ino)
	if !ok {
		t.Fatal("second close not deferred")
	}
	if _, ok := b.own.DeferClose(ino); ok {
		t.Fatal("more closes on their way than MaxClosing")
	}
	waited := make(chan struct{})
	go func() { b.own.WaitClosed(ino); close(waited) }()
	b.w.Recall([]ns.Change{{Kind: ns.ChangeRecall, Holder: b.dc.ID(), Ino: 10}})
	time.Sleep(50 * time.Millisecond)
	select {
	case <-waited:
		t.Fatal("WaitClosed returned with closes on their way")
	default:
	}
	if !b.own.Owns(ino) {
		t.Fatal("disowned (recalled) with closes on their way")
	}
	b.meta.mu.Lock()
	undelegs := len(b.meta.undelegs)
	b.meta.mu.Unlock()
	if undelegs != 0 {
		t.Fatal("delegation given back with closes on their way")
	}
	done()
	done() // once only
	if b.own.Closing() != 1 || !b.own.Owns(ino) {
		t.Fatalf("after one report: %d on their way, owned %v", b.own.Closing(), b.own.Owns(ino))
	}
	done2()
	<-waited
	b.meta.waitOp(t, ns.OpUndelegate)
	if b.own.Owns(ino) || b.own.Closing() != 0 {
		t.Fatal("still owned after the reports and the recall")
	}

	// a forgotten file wakes its waiters
	b2 := newOwnedBed(t, 1<<10, 1<<20)
	ino2, _ := b2.create(t, "b", 500)
	done3, _ := b2.own.DeferClose(ino2)
	waited2 := make(chan struct{})
	go func() { b2.own.WaitClosed(ino2); close(waited2) }()
	time.Sleep(10 * time.Millisecond)
	b2.own.Forget(ino2)
	select {
	case <-waited2:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitClosed of a forgotten file did not return")
	}
	done3()
	if b2.own.Closing() != 0 {
		t.Fatal("closing count after a forgotten file's report")
	}
}
