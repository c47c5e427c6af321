package wire

import (
	"fmt"
	"sync"
)

// The protocol's version. Peers exchange it when they connect (package
// rpc): a peer of another major version is refused, with both versions
// named. Within a major version a minor version may add operations (an
// older server answers ENOSYS) and fields (an older peer skips them), and
// nothing else: no operation or field changes its number or meaning.
const (
	Major = 2
	Minor = 6 // 2.1: ns.Head.Req; 2.2: fwdmap.Placement.Fallbacks; 2.3: ns.Reclaim; 2.4: ns.Lock; 2.5: api.Managers; 2.6: ns.Touch
)

// Version is a protocol version, as peers exchange it.
type Version struct{ Major, Minor uint16 }

// Ours is this build's protocol version.
var Ours = Version{Major, Minor}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Service names the part of the system an operation belongs to.
type Service uint8

// Services.
const (
	Namespace Service = iota + 1 // files, directories, attributes, layouts, the change feed
	Chunks                       // a data server's chunks and its store
	Admin                        // registration, pools, QoS rules, tiers, the burst buffer, faults
	Monitor                      // Beacon's records and questions, jobs, forwarding decisions
)

func (s Service) String() string {
	switch s {
	case Namespace:
		return "namespace"
	case Chunks:
		return "chunks"
	case Admin:
		return "administration"
	case Monitor:
		return "monitoring"
	}
	return "service?"
}

// Spec describes one operation: its number and name, its service, and the
// types of its request and reply.
type Spec struct {
	Op      Op
	Name    string
	Service Service
	req     func() Message
	rep     func() Message
}

// NewRequest returns a zero request of the operation.
func (s *Spec) NewRequest() Message { return s.req() }

// NewReply returns a zero reply of the operation.
func (s *Spec) NewReply() Message { return s.rep() }

var registry struct {
	mu    sync.RWMutex // guards specs (written at init only, read by every frame)
	specs map[Op]*Spec
}

// register adds an operation; numbers and names are unique.
func register(s *Spec) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.specs == nil {
		registry.specs = map[Op]*Spec{}
	}
	if old := registry.specs[s.Op]; old != nil {
		panic(fmt.Sprintf("wire: operation %d registered twice (%s, %s)", s.Op, old.Name, s.Name))
	}
	for _, o := range registry.specs {
		if o.Name == s.Name {
			panic(fmt.Sprintf("wire: operation name %q registered twice", s.Name))
		}
	}
	registry.specs[s.Op] = s
}

// SpecOf returns the operation numbered op, or nil if this build does not
// know it.
func SpecOf(op Op) *Spec {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	return registry.specs[op]
}

// Specs returns every registered operation, by number.
func Specs() []*Spec {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	out := make([]*Spec, 0, len(registry.specs))
	for _, s := range registry.specs {
		out = append(out, s)
	}
	sortSpecs(out)
	return out
}

func sortSpecs(s []*Spec) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].Op < s[j-1].Op; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Def ties an operation to its request type Q and reply type R (whose
// pointers implement Message): callers and handlers of the operation are
// typed by it (rpc.Call, rpc.Table).
type Def[Q, R any] struct {
	Op Op
}

// Define registers operation op with its name, service and types.
func Define[Q, R any, PQ Ptr[Q], PR Ptr[R]](op Op, name string, svc Service) Def[Q, R] {
	register(&Spec{Op: op, Name: name, Service: svc,
		req: func() Message { return PQ(new(Q)) }, rep: func() Message { return PR(new(R)) }})
	return Def[Q, R]{Op: op}
}

// Empty is the request or reply of an operation that carries nothing.
type Empty struct{}

// Fields implements Message.
func (*Empty) Fields(*Codec) {}
