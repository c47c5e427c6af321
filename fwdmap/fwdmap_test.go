package fwdmap_test

import (
	"testing"

	_ "github.com/sluice-hpc/sluice/fwdmap" // registers the operations checked
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

// TestOperations: every operation of the forwarding map carries all its
// fields and reads what earlier minor versions wrote (testdata/v*/).
func TestOperations(t *testing.T) { wiretest.Operations(t, "testdata", wire.Monitor) }

// FuzzDecode: the forwarding map's decoders (wiretest.Fuzz).
func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, wire.Monitor) }
