package e2e

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// times is a file's access, modification and change times.
type times struct{ a, m, c syscall.Timespec }

func statTimes(t *testing.T, p string) times {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return times{st.Atim, st.Mtim, st.Ctim}
}

func after(x, y syscall.Timespec) bool { return x.Nano() > y.Nano() }

// TestAtime: reads and listings update access times by each mount's rule
// (xfstests generic/003's cases): under relatime (the default) the first
// read after a change does and the second does not, and a write makes
// the next read update it again; nothing else of the file changes. The
// other mounts see the new access time within a few seconds. Under
// strictatime every read does; under noatime none; with nodiratime a
// listing leaves the directory's.
func TestAtime(t *testing.T) {
	c := startCluster(t)
	a := c.mnt
	strict := c.mount2(t, "--atime", "strictatime", "--nodiratime")
	none := c.mount2(t, "--atime", "noatime")
	read := func(p string) {
		t.Helper()
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	const tick = 20 * time.Millisecond // the clock moves on between steps

	if err := os.Mkdir(filepath.Join(a, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(a, "d", "f")
	mustWrite(t, f, []byte("aaa"))
	t0 := statTimes(t, f)
	time.Sleep(tick)
	read(f)
	t1 := statTimes(t, f)
	if !after(t1.a, t0.a) || t1.m != t0.m || t1.c != t0.c {
		t.Fatalf("relatime, first read after the write: %+v then %+v (want a later atime only)", t0, t1)
	}
	time.Sleep(tick)
	read(f)
	if t2 := statTimes(t, f); t2 != t1 {
		t.Fatalf("relatime, second read: %+v then %+v (want no change)", t1, t2)
	}
	// the other mounts see the access time once it is sent (a second or so)
	for _, m := range []string{strict, none} {
		p := filepath.Join(m, "d", "f")
		eventually(t, 5*time.Second, func() bool { return statTimes(t, p).a == t1.a }, "the access time on another mount")
	}

	// noatime reads change nothing, here or anywhere
	time.Sleep(tick)
	read(filepath.Join(none, "d", "f"))
	if got := statTimes(t, filepath.Join(none, "d", "f")); got.a != t1.a {
		t.Fatalf("noatime read changed the access time: %+v, was %+v", got, t1)
	}

	// strictatime: every read
	s := filepath.Join(strict, "d", "f")
	time.Sleep(tick)
	read(s)
	s1 := statTimes(t, s)
	time.Sleep(tick)
	read(s)
	s2 := statTimes(t, s)
	if !after(s1.a, t1.a) || !after(s2.a, s1.a) || s2.m != t1.m || s2.c != t1.c {
		t.Fatalf("strictatime reads: %+v, %+v, %+v (want the access time later at each)", t1, s1, s2)
	}
	// the mount with noatime still sees them, once sent
	eventually(t, 5*time.Second, func() bool { return statTimes(t, filepath.Join(none, "d", "f")).a == s2.a },
		"the strictatime mount's access time on the noatime mount")

	// a write makes the next relatime read update it again
	eventually(t, 5*time.Second, func() bool { return statTimes(t, f).a == s2.a }, "the access time back on the first mount")
	time.Sleep(tick)
	mustWrite(t, f, []byte("bbb"))
	w := statTimes(t, f)
	time.Sleep(tick)
	read(f)
	if r := statTimes(t, f); !after(r.a, w.m) || r.m != w.m {
		t.Fatalf("relatime read after a write: %+v then %+v (want an access time after the write)", w, r)
	}

	// directories: a listing updates the access time under relatime,
	// not with nodiratime
	d := filepath.Join(a, "d")
	d0 := statTimes(t, d)
	time.Sleep(tick)
	if _, err := os.ReadDir(d); err != nil {
		t.Fatal(err)
	}
	d1 := statTimes(t, d)
	if !after(d1.a, d0.a) || d1.m != d0.m {
		t.Fatalf("relatime listing: %+v then %+v (want a later atime only)", d0, d1)
	}
	sd := filepath.Join(strict, "d")
	eventually(t, 5*time.Second, func() bool { return statTimes(t, sd).a == d1.a }, "the directory's access time on another mount")
	time.Sleep(tick)
	if _, err := os.ReadDir(sd); err != nil {
		t.Fatal(err)
	}
	if got := statTimes(t, sd); got.a != d1.a {
		t.Fatalf("nodiratime listing changed the directory's access time: %+v, was %+v", got, d1)
	}
}
