package localdirs

import (
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/meta/engine/enginetest"
)

// TestDirs: a directory goes local on the fastest tier with servers or
// the one named, never on the pfs tier or one without servers, nor a
// file; a tier's servers come by id; the modes survive a restart.
func TestDirs(t *testing.T) {
	const dir, file = 2, 3
	isDir := func(ino uint64) error {
		switch ino {
		case dir:
			return nil
		case file:
			return rpc.Errorf(syscall.ENOTDIR, "inode %d", ino)
		}
		return rpc.Errorf(syscall.ENOENT, "no inode %d", ino)
	}
	servers := func() []wire.ServerInfo {
		return []wire.ServerInfo{{ID: 7, Role: "data", Tier: "ssd"}, {ID: 4, Role: "data", Tier: "ssd"},
			{ID: 5, Role: "data", Tier: "pfs"}, {ID: 1, Role: "fwd"}}
	}
	enginetest.Each(t, func(t *testing.T, reopen func() engine.Engine) {
		d := Open(Config{Engine: reopen(), Dir: isDir, Servers: servers})
		if err := d.Set(file, "", true); rpc.Errno(err) != syscall.ENOTDIR {
			t.Fatalf("a file in local mode: %v", err)
		}
		for _, tier := range []string{"mem", "pfs"} {
			if err := d.Set(dir, tier, true); rpc.Errno(err) != syscall.EINVAL {
				t.Fatalf("local mode on tier %s: %v, want EINVAL", tier, err)
			}
		}
		if err := d.Set(dir, "", true); err != nil || d.Tier(dir) != "ssd" {
			t.Fatalf("local mode: %v, tier %q, want ssd (the fastest with servers)", err, d.Tier(dir))
		}
		if s := d.Servers("ssd"); len(s) != 2 || s[0].ID != 4 || s[1].ID != 7 {
			t.Fatalf("the ssd tier's servers %+v: want 4 and 7, by id", s)
		}
		if !strings.HasSuffix(t.Name(), "/mem") { // nothing survives the in-memory engine
			d = Open(Config{Engine: reopen(), Dir: isDir, Servers: servers})
			if d.Tier(dir) != "ssd" {
				t.Fatalf("after a restart: tier %q", d.Tier(dir))
			}
		}
		if err := d.Set(dir, "", false); err != nil || d.Tier(dir) != "" {
			t.Fatalf("back to global: %v, tier %q", err, d.Tier(dir))
		}
	})
}
