package data

import (
	"os"
	"path/filepath"
	"testing"
)

// A data server killed while writing a migration marker leaves its
// temporary file ("4.0.tmp", maybe empty) beside the markers: the next
// start skips it (the marker is only ever renamed into place whole) and
// still reads the markers and fences that are whole. The CI's
// TestFsxModel/keep-cache: a restart refused with "migration marker
// 4.0.tmp: parsing \"\"".
func TestOpenMovesSkipsTornMarkers(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"moving", "moved"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		"moving/4.0.tmp": "", "moving/.4.0.tmp123": "", "moving/5.1": "77\n", "moved/4.tmp": "", "moved/.4.tmp9": "", "moved/6": "2 9\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mv, err := openMoves(dir)
	if err != nil {
		t.Fatalf("start after a torn marker: %v", err)
	}
	if s := mv.sessions[chunkKey{5, 1}]; s == nil || s.id != 77 || len(mv.sessions) != 1 {
		t.Fatalf("sessions %+v, want chunk 5.1's (77) alone", mv.sessions)
	}
	if mv.moved[6][2] != 9 || len(mv.moved) != 1 {
		t.Fatalf("fences %+v, want inode 6 chunk 2 at 9", mv.moved)
	}
}
