// Package rendezvous is rendezvous (highest random weight) hashing: the
// score of a node for a key, the same on every host, so that whoever
// ranks the nodes for a key agrees on their order without asking anyone
// (policy/dfra's stand-ins of a forwarding node, beaconrpc's monitor of a
// job). It owns the hash and nothing else.
package rendezvous

// Score is node's score for key: FNV-1a of both, finished with
// splitmix64's mixer (every bit of either moves half the bits of the
// score, so a key's order does not follow the nodes' names).
func Score(key, node string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	h = (h ^ 0xff) * 1099511628211
	for i := 0; i < len(node); i++ {
		h = (h ^ uint64(node[i])) * 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}
