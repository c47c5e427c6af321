package atomicfile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "id")
	for i, content := range []string{"7\n", "12345\n", ""} {
		if err := Write(p, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("write %d: read %q, %v; want %q", i, b, err, content)
		}
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", st.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries in the directory, want the file alone (no temporary left)", len(ents))
	}
}

func TestWriteViaAndFailure(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "a", "b")
	if err := WriteVia(tmp, p, []byte("job:9"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "job:9" {
		t.Fatalf("read %q", b)
	}
	// the rename fails (no such directory): an error, and the temporary
	// file removed
	if err := WriteVia(tmp, filepath.Join(dir, "none", "b"), []byte("x"), 0o600); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("%s holds %d entries after a failed write, want none", tmp, len(ents))
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "a")); len(ents) != 1 {
		t.Fatalf("%d entries beside the file, want none (the temporary went to %s)", len(ents)-1, tmp)
	}
}

// TestKilledWriter kills a process rewriting a file as fast as it can
// and reads the file after each kill: old content or new, whole. With
// os.WriteFile (truncate, then write) a kill between the two leaves an
// empty or short file, which this test finds.
func TestKilledWriter(t *testing.T) {
	if p := os.Getenv("ATOMICFILE_WRITER"); p != "" {
		for i := 0; ; i++ {
			if err := Write(p, content(i), 0o600); err != nil {
				os.Exit(2)
			}
		}
	}
	p := filepath.Join(t.TempDir(), "state")
	if err := Write(p, content(0), 0o600); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 20; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriter$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_WRITER="+p)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+k*3) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := parse(b)
		if !ok {
			t.Fatalf("kill %d: the file holds %d bytes that are no whole write (%.40q)", k, len(b), b)
		}
		t.Logf("kill %d: write %d whole", k, n)
	}
}

// content is write i: its number, then 64 KiB of it, so that a torn
// write shows.
func content(i int) []byte {
	s := strconv.Itoa(i) + "\n"
	return append([]byte(s), bytes.Repeat([]byte{byte('a' + i%26)}, 64<<10)...)
}

func parse(b []byte) (int, bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(b[:i]))
	return n, err == nil && bytes.Equal(b, content(n))
}
