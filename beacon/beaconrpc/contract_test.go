package beaconrpc_test

import (
	"testing"

	_ "github.com/sluice-hpc/sluice/beacon/beaconrpc" // registers the operations checked
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

// TestOperations: every operation of Beacon's service carries all its
// fields and reads what earlier minor versions wrote (testdata/v*/).
func TestOperations(t *testing.T) { wiretest.Operations(t, "testdata", wire.Monitor) }

// FuzzDecode: the decoders of Beacon's service (wiretest.Fuzz).
func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, wire.Monitor) }
