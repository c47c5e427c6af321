package beaconrpc

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

func TestOpName(t *testing.T) {
	for op, want := range map[wire.Op]string{ns.OpRead: "read", chunk.OpWrite: "write", chunk.OpSync: "meta:chunk-sync", ns.OpMknod: "meta:mknod",
		ns.OpPing: "", OpPut: "", OpQuery: "", wire.Op(60000): ""} {
		if got := OpName(op); got != want {
			t.Errorf("%v: %q, want %q", op, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = OpName(ns.OpGetattr) }); n != 0 {
		t.Fatalf("OpName allocates %v times", n)
	}
}
