package meta

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

// TestLocalDirs: a directory in local mode answers entry operations with
// the data server the name hashes to (the same one every time), lists its
// own older entries with every server of the tier, is never delegated,
// refuses renames into it and survives a restart; a file or a tier with
// no servers cannot go local.
func TestLocalDirs(t *testing.T) {
	forEachEngine(t, func(t *testing.T, open func() *Service) {
		s := open()
		var ids []uint64
		for i := 0; i < 3; i++ {
			id, _ := s.Register(wire.ServerInfo{Role: "data", Tier: "mem", Addr: fmt.Sprintf("x:%d", i), Capacity: 1 << 30})
			ids = append(ids, id)
		}
		d, _ := s.Create(RootIno, "L", syscall.S_IFDIR|0o755, 0, 0, "", true, 0)
		f, _ := s.Create(RootIno, "file", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		old, _ := s.Create(d.Ino, "old", syscall.S_IFREG|0o644, 0, 0, "", true, 0)
		if _, err := setLocal(t, s, f.Ino, "", true); !is(err, syscall.ENOTDIR) {
			t.Fatalf("a file in local mode: %v", err)
		}
		if _, err := setLocal(t, s, d.Ino, "ssd", true); !is(err, syscall.EINVAL) {
			t.Fatalf("local mode on a tier without servers: %v", err)
		}
		if _, err := setLocal(t, s, d.Ino, "", true); err != nil || s.local.Tier(d.Ino) != "mem" {
			t.Fatalf("local mode: %v, tier %q", err, s.local.Tier(d.Ino))
		}
		got := map[uint64]bool{}
		for r := 0; r < 12; r++ {
			name := fmt.Sprintf("rank%d", r)
			for op, call := range map[string]func() (*ns.EntryRep, error){
				"lookup": func() (*ns.EntryRep, error) {
					return rpc.Do(t.Context(), s, ns.Lookup, &ns.NameReq{Parent: d.Ino, Name: name})
				},
				"mkdir": func() (*ns.EntryRep, error) {
					return rpc.Do(t.Context(), s, ns.Mkdir, &ns.MkdirReq{Parent: d.Ino, Name: name})
				},
				"rmdir": func() (*ns.EntryRep, error) {
					return rpc.Do(t.Context(), s, ns.Rmdir, &ns.NameReq{Parent: d.Ino, Name: name})
				},
			} {
				resp, err := call()
				if err != nil || resp.Redirect == nil || len(resp.Redirect.Servers) != 3 || resp.Attr != nil || !resp.Redirect.Own {
					t.Fatalf("%s %s: %+v %v", op, name, resp, err)
				}
				servers := resp.Redirect.Servers
				for i, si := range servers {
					if si.ID != ids[i] {
						t.Fatalf("servers %+v not by id", servers)
					}
				}
				got[servers[wire.LocalPick(name, 3)].ID] = true
			}
		}
		if len(got) != 3 {
			t.Fatalf("12 names on %d of 3 servers", len(got))
		}
		// the entry made before: served here
		if resp, err := rpc.Do(t.Context(), s, ns.Lookup, &ns.NameReq{Parent: d.Ino, Name: "old"}); err != nil || resp.Redirect != nil || resp.Attr.Ino != old.Ino {
			t.Fatalf("lookup of the older entry: %+v %v", resp, err)
		}
		resp, err := rpc.Do(t.Context(), s, ns.Readdir, &ns.ReaddirReq{Ino: d.Ino})
		if err != nil || resp.Redirect == nil || len(resp.Redirect.Servers) != 3 || len(resp.Redirect.Entries) != 1 || len(resp.Entries) != 0 {
			t.Fatalf("readdir: %+v %v", resp, err)
		}
		if _, err := rpc.Do(t.Context(), s, ns.Delegate, &ns.DelegateReq{Client: 1, Dir: d.Ino}); !is(err, syscall.EBUSY) {
			t.Fatalf("delegation of a local-mode directory: %v", err)
		}
		if _, err := rpc.Do(t.Context(), s, ns.Rename, &ns.RenameReq{Parent: RootIno, Name: "file", NewParent: d.Ino, NewName: "f"}); !is(err, syscall.EXDEV) {
			t.Fatalf("rename into a local-mode directory: %v", err)
		}
		if _, err := rpc.Do(t.Context(), s, ns.Rename, &ns.RenameReq{Parent: d.Ino, Name: "rank1", NewParent: RootIno, NewName: "r"}); !is(err, syscall.EXDEV) {
			t.Fatalf("rename of a local entry out: %v", err)
		}
		if _, err := rpc.Do(t.Context(), s, ns.Rename, &ns.RenameReq{Parent: d.Ino, Name: "old", NewParent: RootIno, NewName: "old"}); err != nil {
			t.Fatalf("rename of an older, global entry out: %v", err)
		}
		if t.Name() == "TestLocalDirs/mem" {
			return
		}
		s = open()
		if s.local.Tier(d.Ino) != "mem" {
			t.Fatal("local mode lost in a restart")
		}
		if _, err := setLocal(t, s, d.Ino, "", false); err != nil || s.local.Tier(d.Ino) != "" {
			t.Fatalf("back to global: %v", err)
		}
		if resp, err := rpc.Do(t.Context(), s, ns.Lookup, &ns.NameReq{Parent: d.Ino, Name: "rank1"}); !is(err, syscall.ENOENT) {
			t.Fatalf("lookup in a global directory again: %+v %v", resp, err)
		}
	})
}

// setLocal puts directory ino in local mode on tier (on) or takes it out,
// as `sluice file stripe --local` does (ns.SetLayout).
func setLocal(t *testing.T, s *Service, ino uint64, tier string, on bool) (*ns.SetLayoutRep, error) {
	return rpc.Do(t.Context(), s, ns.SetLayout, &ns.SetLayoutReq{Ino: ino, Tier: tier, Local: on, Global: !on})
}
