package fwd

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
)

func TestJobTableCounts(t *testing.T) {
	var jt jobTable
	jt.record(&wire.Msg{Op: wire.OpWrite, Who: wire.Who{Job: "7", Rank: 1, Node: "cn1"}}, 4096)
	jt.record(&wire.Msg{Op: wire.OpRead, Who: wire.Who{Job: "7", Rank: 2, Node: "cn2"}}, 8192)
	jt.record(&wire.Msg{Op: wire.OpLookup, Who: wire.Who{Job: "7", Rank: 1}}, 0)
	jt.record(&wire.Msg{Op: wire.OpFsync, Who: wire.Who{Job: "7", Rank: 1}}, 0)
	jt.record(&wire.Msg{Op: wire.OpCreateBatch, Entries: make([]wire.DirEntry, 5), Who: wire.Who{Job: "7", Rank: 1}}, 0)
	jt.record(&wire.Msg{Op: wire.OpGetattr, Who: wire.Who{Rank: -1}}, 0)
	got := jt.snapshot()
	if len(got) != 2 || got[0].Job != "-" || got[1].Job != "7" {
		t.Fatalf("jobs: %+v", got)
	}
	j := got[1]
	if j.Ops != 5 || j.MetaOps != 6 || j.ReadBytes != 8192 || j.WriteBytes != 4096 ||
		len(j.Ranks) != 2 || len(j.Nodes) != 2 {
		t.Fatalf("job 7: %+v (want 5 requests, 1 lookup + 5 batched creates, 8192 read, 4096 written, 2 ranks, 2 nodes)", j)
	}
}
