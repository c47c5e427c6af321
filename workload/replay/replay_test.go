package replay

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAwaitFile: the next of the checkpoints due at one instant starts
// once the one before has created its file, and at the latest after
// tieWait when it has not (its writer may wait for its previous
// checkpoint).
func TestAwaitFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ckpt.1")
	opened := make(chan struct{})
	start := time.Now()
	seen := make(chan time.Duration, 1)
	go func() { seen <- awaitFile(p, opened) }()
	time.Sleep(2 * time.Millisecond)
	select {
	case <-opened:
		t.Fatal("opened before the file was created")
	default:
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-opened
	if d := time.Since(start); d >= tieWait {
		t.Errorf("opened after %v, want as the file came (before %v)", d, tieWait)
	}
	if d := <-seen; d < 2*time.Millisecond || d >= tieWait {
		t.Errorf("the file seen after %v, want 2 ms or a little more", d)
	}
	// no file: given up after tieWait
	opened = make(chan struct{})
	start = time.Now()
	if d := awaitFile(p+".none", opened); d != 0 {
		t.Errorf("a file never created seen after %v", d)
	}
	<-opened
	if d := time.Since(start); d < tieWait || d > 10*tieWait {
		t.Errorf("without the file: opened after %v, want about %v", d, tieWait)
	}
}
