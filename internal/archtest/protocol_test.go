package archtest

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	_ "github.com/sluice-hpc/sluice/api" // each registers its operations
	_ "github.com/sluice-hpc/sluice/beacon/beaconrpc"
	_ "github.com/sluice-hpc/sluice/fwdmap"
	"github.com/sluice-hpc/sluice/internal/wire"
	_ "github.com/sluice-hpc/sluice/internal/wire/chunk"
	_ "github.com/sluice-hpc/sluice/internal/wire/ns"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated parts of the docs")

// TestProtocolDoc: docs/protocol.md lists every operation of this build,
// with its number, service and types.
func TestProtocolDoc(t *testing.T) {
	var b strings.Builder
	b.WriteString("| number | name | service | request | reply |\n|---|---|---|---|---|\n")
	for _, s := range wire.Specs() {
		req, rep := fmt.Sprintf("%T", s.NewRequest()), fmt.Sprintf("%T", s.NewReply())
		b.WriteString(fmt.Sprintf("| %d | `%s` | %v | `%s` | `%s` |\n", s.Op, s.Name, s.Service,
			strings.TrimPrefix(req, "*"), strings.TrimPrefix(rep, "*")))
	}
	checkGenerated(t, "../../docs/protocol.md", "ops", b.String())
}

// checkGenerated checks the part of file between <!-- name --> and
// <!-- /name --> is want (with -update-docs, makes it so).
func checkGenerated(t *testing.T, file, name, want string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	open, close := "<!-- "+name+" -->\n", "<!-- /"+name+" -->"
	i, j := strings.Index(doc, open), strings.Index(doc, close)
	if i < 0 || j < i {
		t.Fatalf("%s: no %s…%s", file, open, close)
	}
	got := doc[i+len(open) : j]
	if got == want {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(file, []byte(doc[:i+len(open)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is stale (go test ./internal/archtest -update-docs):\n%s", file, want)
}
