package chunk_test

import (
	"testing"

	"github.com/sluice-hpc/sluice/internal/wire"
	_ "github.com/sluice-hpc/sluice/internal/wire/chunk" // registers the operations checked
	"github.com/sluice-hpc/sluice/internal/wire/wiretest"
)

// TestOperations: every operation of the chunk service carries all its
// fields and reads what earlier minor versions wrote (testdata/v*/).
func TestOperations(t *testing.T) { wiretest.Operations(t, "testdata", wire.Chunks) }

// FuzzDecode: the chunk service's decoders (wiretest.Fuzz).
func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, wire.Chunks) }
