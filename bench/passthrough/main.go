// Command passthrough is the benchmark baseline: a go-fuse loopback file
// system over a directory, with direct I/O on every open file (as sluice's
// client) and the kernel's FUSE passthrough disabled, so every byte crosses
// the FUSE daemon just as it does for sluice.
//
//	passthrough MOUNTPOINT ORIGINAL
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type dioNode struct {
	*fs.LoopbackNode
}

var (
	_ fs.NodeOpener      = (*dioNode)(nil)
	_ fs.NodeCreater     = (*dioNode)(nil)
	_ fs.NodeWrapChilder = (*dioNode)(nil)
)

// WrapChild makes every node of the tree a dioNode.
func (n *dioNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	if ln, ok := ops.(*fs.LoopbackNode); ok {
		return &dioNode{LoopbackNode: ln}
	}
	return ops
}

func (n *dioNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return fh, fl | fuse.FOPEN_DIRECT_IO, errno
}

func (n *dioNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, fh, fl | fuse.FOPEN_DIRECT_IO, errno
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: passthrough MOUNTPOINT ORIGINAL")
		os.Exit(2)
	}
	lroot, err := fs.NewLoopbackRoot(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "passthrough:", err)
		os.Exit(1)
	}
	root := &dioNode{LoopbackNode: lroot.(*fs.LoopbackNode)}
	// the same kernel cache lifetimes as sluice's client, so metadata
	// rates compare like with like
	ttl := time.Second
	opts := &fs.Options{EntryTimeout: &ttl, AttrTimeout: &ttl, MountOptions: fuse.MountOptions{
		AllowOther: true, MaxWrite: 1 << 20, MaxBackground: 64, FsName: "passthrough", Name: "passthrough",
		DirectMount: true, DisableSplice: true,
		DisabledCapabilities: fuse.CAP_PASSTHROUGH,
	}}
	srv, err := fs.Mount(os.Args[1], root, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "passthrough:", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		srv.Unmount()
	}()
	srv.Wait()
}
