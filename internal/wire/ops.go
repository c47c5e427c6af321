package wire

import "time"

// Op numbers every operation of the protocol. Values are part of the wire
// format within a major version: append, never renumber. Each service's
// package numbers its own (docs/protocol.md): internal/wire/chunk 100-149,
// api 200-299 and 330-349, beacon/beaconrpc 300-319, fwdmap 320-329,
// internal/wire/ns 400-499.
type Op uint16

// Activity is a file's open/close history as the metadata service saw it
// since it started (ONFS §6.3: T_co and T_oc are the metadata service's),
// the input of file coolness (policy/tiering). Times are unix ns (0:
// never); means are over the service's lifetime.
type Activity struct {
	Open      int    // handles open now
	Opened    uint64 // times it went from closed to open
	LastOpen  int64
	LastClose int64
	MeanTco   time.Duration // close → next open
	MeanToc   time.Duration // open → close
	// LastAccess is the last read or write as the forwarding daemons
	// report them (ns.Access, about every half second; 0: none reported)
	LastAccess int64
}

// Fields implements Message.
func (a *Activity) Fields(c *Codec) {
	c.Int(1, &a.Open)
	c.Uint64(2, &a.Opened)
	c.Int64(3, &a.LastOpen)
	c.Int64(4, &a.LastClose)
	c.Duration(5, &a.MeanTco)
	c.Duration(6, &a.MeanToc)
	c.Int64(7, &a.LastAccess)
}

// String is the operation's registered name ("op?" if there is none).
func (o Op) String() string {
	if s := SpecOf(o); s != nil {
		return s.Name
	}
	return "op?"
}

// Class is the forwarding pipeline queue a request belongs to.
type Class uint8

// Pipeline classes.
const (
	ClassMeta Class = iota
	ClassSmall
	ClassBulk
	NumClasses
)

// SmallIOMax is the largest read or write that still counts as small I/O.
const SmallIOMax = 64 << 10

// IOClass is the pipeline class of a read or write of size bytes.
func IOClass(size uint64) Class {
	if size > SmallIOMax {
		return ClassBulk
	}
	return ClassSmall
}

// Classed is implemented by the requests whose pipeline class is not
// ClassMeta: reads, writes and syncs.
type Classed interface {
	Class() Class
}

// OfFile is implemented by requests about one file's data: a connection
// of bulk requests is picked by the file.
type OfFile interface {
	FileIno() uint64
}

// Classify returns the pipeline class of request m.
func Classify(m Message) Class {
	if r, ok := m.(Classed); ok {
		return r.Class()
	}
	return ClassMeta
}

// LaneKey returns the file a request is about (0: none), which picks its
// bulk connection.
func LaneKey(m Message) uint64 {
	if r, ok := m.(OfFile); ok {
		return r.FileIno()
	}
	return 0
}

// Class implements Classed: a class stands for a request of it.
func (c Class) Class() Class { return c }

func (c Class) String() string {
	switch c {
	case ClassMeta:
		return "meta"
	case ClassSmall:
		return "small"
	case ClassBulk:
		return "bulk"
	}
	return "class?"
}

// Delegations of directories to mounts (meta/deleg.go, client/wbcreate.go).
const (
	// DelegCooldown is how long a recalled or refused directory is not
	// delegated again (and a mount does not ask again).
	DelegCooldown = time.Second
	// DelegInos is how many inode numbers a delegation hands out.
	DelegInos = 1024
	// RecallWait bounds how long a request waits for a recalled
	// delegation to come back (the holder may be dead).
	RecallWait = 3 * time.Second
)

// MigrationJob is the job migration traffic and the tiering manager's
// decisions are recorded under in Beacon.
const MigrationJob = "sluice-migration"

// NameMax is the longest name of a directory entry, in bytes (NAME_MAX).
const NameMax = 255
