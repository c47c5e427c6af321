package client

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// readOnly says whether the mount at mnt is read-only now, as the
// mount table shows it (mounted ro, or remounted so since: the kernel
// does not tell the file system), looked up at most every 100 ms. It
// reads /proc/self/mountinfo, never the mount itself, so it may be
// called while the kernel waits for a reply.
func readOnly(mnt string) func() bool {
	mnt = filepath.Clean(mnt)
	var mu sync.Mutex // guards at, ro
	var at time.Time
	var ro bool
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) < 100*time.Millisecond {
			return ro
		}
		at, ro = time.Now(), mountedReadOnly(mnt)
		return ro
	}
}

// mountedReadOnly reads the mount table for mnt's per-mount options (the
// last mount there: one on top hides those below).
func mountedReadOnly(mnt string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	ro := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ...
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || unescapeMountinfo(fs[4]) != mnt {
			continue
		}
		ro = slices.Contains(strings.Split(fs[5], ","), "ro")
	}
	return ro
}

// unescapeMountinfo undoes the mount table's octal escapes (\040 for a
// space, \011, \012, \134).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v < 256
}
