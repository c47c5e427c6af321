// Package meta is the metadata service: the namespace (inodes, directory
// entries, attributes, symlinks, hard links), file layouts (which tier and
// which data servers hold each chunk) and their placement, migration and
// replicas, truncation, the registry of data servers and forwarding
// nodes, and the garbage collection of deleted files' chunks.
//
// It persists everything through an engine.Engine and never touches file
// data itself, except to ask data servers to trim or delete chunks of files
// it truncated or deleted, and to keep the pfs tier's namespace view in step.
// It does not cache on behalf of clients and does not know about FUSE; it
// keeps a feed of namespace changes (feed.go) so that mounts can, and
// delegates directories to mounts that create files in them by themselves
// (deleg.go), recalling a delegation before any other client's request
// touches the directory.
//
// The metadata daemon's other services keep their state beside it, on
// their own keys of the same engine, in packages of their own: the QoS
// rules (meta/qosrules), resource pools (meta/pools, which placement asks
// through SetPools), burst-buffer grants (meta/bbgrants), directories'
// tiering policies (meta/tierpolicy), which directories are node-local
// (meta/localdirs) and the replica drops owed to data servers
// (meta/drops, which this package adds to its layout changes' batches and
// delivers). This package must not keep their state; they see the
// namespace only through Dir and Parent.
package meta
