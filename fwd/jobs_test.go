package fwd

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

func TestJobTableCounts(t *testing.T) {
	var jt jobTable
	head := func(who wire.Who) ns.Head { return ns.Head{Who: who} }
	jt.record(ns.OpWrite, &ns.IOReq{Head: head(wire.Who{Job: "7", Rank: 1, Node: "cn1"})}, 4096)
	jt.record(ns.OpRead, &ns.IOReq{Head: head(wire.Who{Job: "7", Rank: 2, Node: "cn2"})}, 8192)
	jt.record(ns.OpLookup, &ns.NameReq{Head: head(wire.Who{Job: "7", Rank: 1})}, 0)
	jt.record(ns.OpFsync, &ns.SizeReq{Head: head(wire.Who{Job: "7", Rank: 1})}, 0)
	jt.record(ns.OpCreateBatch, &ns.BatchReq{Entries: make([]ns.BatchEntry, 5), Head: head(wire.Who{Job: "7", Rank: 1})}, 0)
	jt.record(ns.OpGetattr, &ns.InoReq{Head: head(wire.Who{Rank: -1})}, 0)
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
