package wire

import "hash/fnv"

// Node-local namespaces (docs/nodelocal.md). A directory set to local
// mode (`sluice file stripe --local DIR`) keeps its entries out of the
// metadata service: each name in it is hashed to one data server of the
// directory's tier, which keeps the entry and everything under it in its
// own file system. Inodes there have LocalBit set, the serving data
// server's id in bits 48–62 and the server's number for the file in bits
// 0–47; a forwarding daemon sends every request naming such an inode to
// that server, never to the metadata service.

// LocalBit marks the inode number of a file in a node-local namespace.
const LocalBit uint64 = 1 << 63

const localNumBits = 48

// LocalIno is the inode number of file num on data server server.
func LocalIno(server, num uint64) uint64 {
	return LocalBit | (server&0x7fff)<<localNumBits | num&(1<<localNumBits-1)
}

// IsLocal says whether ino is in a node-local namespace.
func IsLocal(ino uint64) bool { return ino&LocalBit != 0 }

// LocalServer is the data server that serves local inode ino.
func LocalServer(ino uint64) uint64 { return ino &^ LocalBit >> localNumBits }

// LocalNum is the serving data server's own number for local inode ino.
func LocalNum(ino uint64) uint64 { return ino & (1<<localNumBits - 1) }

// LocalPick is the index in servers (the tier's data servers, by id) of
// the one that serves entry name of a local-mode directory: a hash of the
// name (a node's rank), so a restarted job finds its private directory on
// the same server while the tier's servers stay the same.
func LocalPick(name string, servers int) int {
	if servers <= 0 {
		return -1
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64() % uint64(servers))
}
