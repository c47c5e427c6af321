package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-hpc/sluice/client/vfs"
	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/meta"
)

// mountless starts a metadata service, a mem data server and a forwarding
// daemon in the test's process and returns the adapter of a mount of
// them, not mounted: the tests call its go-fuse methods as the kernel
// would, with the requests' structures.
func mountless(t *testing.T, cfg vfs.Config) (*FS, *prometheus.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	dir := t.TempDir()
	ds, err := data.New(data.Config{Kind: "mem", Dir: dir, Capacity: 1 << 30, Meta: metaAddr, Secret: testrig.Secret,
		Log: testrig.Quiet(), StateDir: dir + "/.state"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := ds.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go ds.Run(ctx, ln, "")
	f := fwd.New(fwd.Config{Meta: metaAddr, Secret: testrig.Secret, Log: testrig.Quiet()})
	fln, err := f.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go f.Run(ctx, fln, "")
	testrig.WaitData(t, svc, 1)
	reg := prometheus.NewRegistry()
	cfg.Fwd, cfg.Secret, cfg.Log, cfg.Node = f.Addr(), testrig.Secret, testrig.Quiet(), "cn0"
	fs, err := New(ctx, Config{Config: cfg, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fs.Close)
	return fs, reg
}

// caller is the kernel's header of a request by this process (uid 1000)
// about inode ino.
func caller(ino uint64) fuse.InHeader {
	return fuse.InHeader{NodeId: ino, Caller: fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 1000}, Pid: uint32(os.Getpid())}}
}

// TestAdapter: the go-fuse methods translate the kernel's requests into
// the core's calls and its answers into replies: a file created, written,
// closed, looked up, read back, truncated and removed shows the same
// inode, mode, owner and size in every reply; opens ask for direct I/O;
// errors come back as the errno the core gives; every operation is
// counted as the application saw it.
func TestAdapter(t *testing.T) {
	fs, reg := mountless(t, vfs.Config{WriteBehind: -1})
	const root = meta.RootIno

	var ce fuse.CreateOut
	in := fuse.CreateIn{InHeader: caller(root), Mode: syscall.S_IFREG | 0o666, Umask: 0o022, Flags: syscall.O_RDWR | syscall.O_EXCL}
	if st := fs.Create(nil, &in, "f", &ce); st != fuse.OK {
		t.Fatalf("create: %v", st)
	}
	ino := ce.NodeId
	if ino == 0 || ce.Ino != ino || ce.Mode != syscall.S_IFREG|0o644 || ce.Uid != 1000 || ce.Gid != 1000 ||
		ce.OpenFlags&fuse.FOPEN_DIRECT_IO == 0 || ce.Fh == 0 {
		t.Fatalf("create reply %+v: want the inode, mode 0644 (the umask), owner 1000, direct I/O, a handle", ce)
	}
	if st := fs.Create(nil, &in, "f", &ce); st != fuse.Status(syscall.EEXIST) {
		t.Fatalf("an exclusive create of a name that exists: %v, want EEXIST", st)
	}
	payload := bytes.Repeat([]byte("sluice"), 1000)
	w := fuse.WriteIn{InHeader: caller(ino), Fh: ce.Fh, Offset: 10, Size: uint32(len(payload))}
	if n, st := fs.Write(nil, &w, payload); st != fuse.OK || n != uint32(len(payload)) {
		t.Fatalf("write: %d %v", n, st)
	}
	if st := fs.Flush(nil, &fuse.FlushIn{InHeader: caller(ino), Fh: ce.Fh}); st != fuse.OK {
		t.Fatalf("flush: %v", st)
	}
	fs.Release(nil, &fuse.ReleaseIn{InHeader: caller(ino), Fh: ce.Fh})

	var le fuse.EntryOut
	h := caller(root)
	if st := fs.Lookup(nil, &h, "f", &le); st != fuse.OK || le.NodeId != ino || le.Size != uint64(10+len(payload)) || le.Blksize != 1<<20 {
		t.Fatalf("lookup: %v %+v", st, le)
	}
	if st := fs.Lookup(nil, &h, "nope", &le); st != fuse.ENOENT {
		t.Fatalf("lookup of no name: %v, want ENOENT", st)
	}
	if st := fs.Lookup(nil, &h, strings.Repeat("x", 256), &le); st != fuse.Status(syscall.ENAMETOOLONG) {
		t.Fatalf("lookup of a name of 256 bytes: %v, want ENAMETOOLONG", st)
	}

	var oo fuse.OpenOut
	if st := fs.Open(nil, &fuse.OpenIn{InHeader: caller(ino), Flags: syscall.O_RDONLY}, &oo); st != fuse.OK || oo.Fh == 0 ||
		oo.OpenFlags&fuse.FOPEN_DIRECT_IO == 0 {
		t.Fatalf("open: %v %+v", st, oo)
	}
	buf := make([]byte, 1<<16)
	r, st := fs.Read(nil, &fuse.ReadIn{InHeader: caller(ino), Fh: oo.Fh, Offset: 0, Size: uint32(len(buf))}, buf)
	if st != fuse.OK {
		t.Fatalf("read: %v", st)
	}
	got, _ := r.Bytes(make([]byte, len(buf)))
	want := append(make([]byte, 10), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d written after 10 zeros", len(got), len(want))
	}
	r.Done()
	fs.Release(nil, &fuse.ReleaseIn{InHeader: caller(ino), Fh: oo.Fh})

	var ao fuse.AttrOut
	sa := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: caller(ino), Valid: fuse.FATTR_SIZE | fuse.FATTR_MODE,
		Size: 100, Mode: 0o600}}
	if st := fs.SetAttr(nil, &sa, &ao); st != fuse.OK || ao.Size != 100 || ao.Mode != syscall.S_IFREG|0o600 || ao.Ino != ino {
		t.Fatalf("truncate and chmod: %v %+v", st, ao)
	}
	if st := fs.GetAttr(nil, &fuse.GetAttrIn{InHeader: caller(ino)}, &ao); st != fuse.OK || ao.Size != 100 || ao.Timeout() <= 0 {
		t.Fatalf("getattr: %v %+v", st, ao)
	}

	var de fuse.EntryOut
	if st := fs.Mkdir(nil, &fuse.MkdirIn{InHeader: caller(root), Mode: 0o777, Umask: 0o022}, "d", &de); st != fuse.OK ||
		de.Mode != syscall.S_IFDIR|0o755 {
		t.Fatalf("mkdir: %v %+v", st, de)
	}
	if st := fs.Rename(nil, &fuse.RenameIn{InHeader: caller(root), Newdir: de.NodeId}, "f", "g"); st != fuse.OK {
		t.Fatalf("rename into d: %v", st)
	}
	if st := fs.Rmdir(nil, &h, "d"); st != fuse.Status(syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a directory with a file: %v, want ENOTEMPTY", st)
	}
	if names := listing(t, fs, de.NodeId); names != ".,..,g" {
		t.Fatalf("listing of d: %s", names)
	}
	dh := caller(de.NodeId)
	if st := fs.Unlink(nil, &dh, "g"); st != fuse.OK {
		t.Fatalf("unlink: %v", st)
	}
	if st := fs.Rmdir(nil, &h, "d"); st != fuse.OK {
		t.Fatalf("rmdir: %v", st)
	}

	var so fuse.StatfsOut
	if st := fs.StatFs(nil, &h, &so); st != fuse.OK || so.Blocks != (1<<30)/4096 || so.Bsize != 4096 {
		t.Fatalf("statfs: %v %+v", st, so)
	}
	if n := testutil.ToFloat64(fs.met.requests.WithLabelValues("meta:mknod")); n < 1 {
		t.Fatalf("creates counted: %v", n)
	}
	if n := testutil.ToFloat64(fs.met.requests.WithLabelValues("write")); n != 1 {
		t.Fatalf("writes counted: %v, want 1", n)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// listing opens directory ino, reads its entries the way the kernel does
// (from offset 0, a page at a time) and returns their names.
func listing(t *testing.T, fs *FS, ino uint64) string {
	t.Helper()
	var oo fuse.OpenOut
	if st := fs.OpenDir(nil, &fuse.OpenIn{InHeader: caller(ino)}, &oo); st != fuse.OK {
		t.Fatalf("opendir: %v", st)
	}
	defer fs.ReleaseDir(&fuse.ReleaseIn{InHeader: caller(ino), Fh: oo.Fh})
	var names []string
	for off := uint64(0); ; {
		l := fuse.NewDirEntryList(make([]byte, 4096), off)
		if st := fs.ReadDir(nil, &fuse.ReadIn{InHeader: caller(ino), Fh: oo.Fh, Offset: off}, l); st != fuse.OK {
			t.Fatalf("readdir: %v", st)
		}
		b := l.Bytes()
		if len(b) == 0 {
			break
		}
		// struct fuse_dirent: ino, off, namelen, type, name (8-byte padded)
		for len(b) >= 24 {
			next := binary.LittleEndian.Uint64(b[8:])
			n := binary.LittleEndian.Uint32(b[16:])
			names = append(names, string(b[24:24+n]))
			off = next
			b = b[(24+n+7)&^7:]
		}
	}
	return strings.Join(names, ",")
}
