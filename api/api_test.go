package api_test

import (
	"testing"

	_ "github.com/sluice-hpc/sluice/api" // registers the operations checked
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

// TestOperations: every operation here carries all its fields and reads
// what earlier minor versions wrote (testdata/v*/).
func TestOperations(t *testing.T) {
	wiretest.Operations(t, "testdata", wire.Monitor)
	wiretest.Operations(t, "testdata", wire.Admin)
}

// FuzzDecode: the decoders of the monitoring operations here
// (wiretest.Fuzz).
func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, wire.Monitor) }

// FuzzDecodeAdmin: the administration service's decoders.
func FuzzDecodeAdmin(f *testing.F) { wiretest.Fuzz(f, wire.Admin) }
