package meta

import (
	"encoding/binary"
	"time"

	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta/engine"
)

// Requests sent again (docs/metadata.md, "Failover of the metadata
// service"). A mount numbers its requests (ns.Head.Req, with its client
// id). A mutation whose answer was lost — its server killed or cut off
// after the commit, the request sent again to the standby that took over
// — must be neither made twice nor refused for having been made (an
// exclusive create, mkdir, symlink or link answering EEXIST, an unlink,
// rmdir or rename ENOENT). So the service commits 'A' client req → the
// commit's time in the same batch as the mutation, and answers a request
// it finds there as made: an entry with its attributes now, a removal or
// rename as done. Records older than replyKeep go with each pass of the
// garbage collection.

// replyKeep is how long a mutation's record is kept: longer than any
// request's timeout, so a request sent again finds it.
const replyKeep = 10 * time.Minute

func replyKey(client, req uint64) []byte {
	return binary.BigEndian.AppendUint64(key1(pReply, client), req)
}

// replyBatch is the record of request h's mutation, to commit with it
// (nil: h is not numbered).
func (s *Service) replyBatch(h *ns.Head) *engine.Batch {
	if h == nil || h.Req == 0 || h.Client == 0 {
		return nil
	}
	var b engine.Batch
	b.Set(replyKey(h.Client, h.Req), binary.BigEndian.AppendUint64(nil, uint64(s.now().UnixNano())))
	return &b
}

// replied says whether request h's mutation was committed already.
func (s *Service) replied(h *ns.Head) bool {
	if h == nil || h.Req == 0 || h.Client == 0 {
		return false
	}
	_, err := s.e.Get(replyKey(h.Client, h.Req))
	return err == nil
}

// withReply adds the records in extra (nil ones skipped) to b.
func withReply(b *engine.Batch, extra []*engine.Batch) {
	for _, x := range extra {
		if x != nil {
			b.Ops = append(b.Ops, x.Ops...)
		}
	}
}

// sweepReplies deletes the records older than replyKeep.
func (s *Service) sweepReplies() error {
	cut := s.now().Add(-replyKeep).UnixNano()
	var b engine.Batch
	err := s.e.Scan([]byte{pReply}, nil, func(k, v []byte) bool {
		if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) < cut {
			b.Del(append([]byte(nil), k...))
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, p := range engine.Parts(s.e, &b) {
		if err := s.e.Apply(p, false); err != nil {
			return err
		}
	}
	return nil
}
