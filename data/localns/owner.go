package localns

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/atomicfile"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
)

// Owners: each private directory (an entry of a local-mode directory)
// belongs to the job, or else the node, that made it, recorded in a file
// under ownersDir; only its owner may change what is under it.

// ownerOf is who owns what request m makes: its batch job ("job:ID") when
// it runs in one — every node of the job, a replacement node or the job
// requeued under the same id writes there — else its compute node
// ("node:NAME"); "" when the request names neither.
func ownerOf(who wire.Who) string {
	switch {
	case who.Job != "":
		return "job:" + who.Job
	case who.Node != "":
		return "node:" + who.Node
	}
	return ""
}

// key is the private directory path p is in ("DIRINO/NAME" of its entry
// in a local-mode directory), "" for a local-mode directory itself.
func (n *NS) key(p string) string {
	rel, err := filepath.Rel(n.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	parts := strings.SplitN(rel, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// owner is the node owning private directory key ("": none recorded).
func (n *NS) owner(key string) string {
	n.mu.Lock()
	o, ok := n.owners[key]
	n.mu.Unlock()
	if ok {
		return o
	}
	b, err := os.ReadFile(filepath.Join(n.root, ownersDir, key))
	if err == nil {
		o = string(b)
	}
	n.mu.Lock()
	n.owners[key] = o
	n.mu.Unlock()
	return o
}

// setOwner records owner (ownerOf) for the private directory at p.
func (n *NS) setOwner(p, owner string) error {
	key := n.key(p)
	f := filepath.Join(n.root, ownersDir, key)
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return errno(err)
	}
	// the temporary file beside the DIRINO directories, where no name is
	// taken for a directory's
	if err := atomicfile.WriteVia(filepath.Join(n.root, ownersDir), f, []byte(owner), 0o600); err != nil {
		return errno(err)
	}
	n.mu.Lock()
	n.owners[key] = owner
	n.mu.Unlock()
	return nil
}

// dropOwner forgets the owner of the private directory at p (removed).
func (n *NS) dropOwner(p string) {
	key := n.key(p)
	os.Remove(filepath.Join(n.root, ownersDir, key))
	n.mu.Lock()
	delete(n.owners, key)
	n.mu.Unlock()
}

// writable refuses a change by who of what p is in, if p is in a private
// directory who does not own (the job, or the node, that made it): to
// everyone else a private directory is a read-only view (listing, stat,
// read; docs/nodelocal.md). Root may do anything; a directory made by a
// request naming no job and no node has no owner and is not protected.
func (n *NS) writable(who wire.Who, p string) error {
	w := ownerOf(who)
	if who.User == 0 || w == "" {
		return nil
	}
	if o := n.owner(n.key(p)); o != "" && o != w {
		return rpc.Errorf(syscall.EROFS, "local namespace: %s belongs to %s: read-only to %s", n.key(p), o, w)
	}
	return nil
}

// writableDir is writable for what local directory dir is in.
func (n *NS) writableDir(who wire.Who, dir uint64) error {
	p, err := n.path(dir)
	if err != nil {
		return nil // the operation reports it
	}
	return n.writable(who, p)
}
