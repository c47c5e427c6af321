package beaconrpc

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/chunk"
)

func TestOpName(t *testing.T) {
	for op, want := range map[wire.Op]string{wire.OpRead: "read", chunk.OpWrite: "write", chunk.OpSync: "meta:chunk-sync", wire.OpMknod: "meta:mknod",
		wire.OpPing: "", OpPut: "", OpQuery: "", wire.Op(60000): ""} {
		if got := OpName(op); got != want {
			t.Errorf("%v: %q, want %q", op, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = OpName(wire.OpGetattr) }); n != 0 {
		t.Fatalf("OpName allocates %v times", n)
	}
}
