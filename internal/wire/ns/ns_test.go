package ns_test

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	_ "github.com/sluice-hpc/sluice/internal/wire/ns" // registers the operations checked
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

// TestOperations: every typed operation of the namespace service carries
// all its fields and reads what earlier minor versions wrote
// (testdata/v*/).
func TestOperations(t *testing.T) { wiretest.Operations(t, "testdata", wire.Namespace) }

// FuzzDecode: the namespace service's typed decoders (wiretest.Fuzz).
func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, wire.Namespace) }
