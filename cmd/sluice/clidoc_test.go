package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md")

// TestCLIDoc fails when docs/cli.md is not what the commands generate.
func TestCLIDoc(t *testing.T) {
	var b bytes.Buffer
	writeCLIDoc(&b, newRoot())
	const path = "../../docs/cli.md"
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(old, b.Bytes()) {
		t.Fatalf("docs/cli.md is stale: go test ./cmd/sluice -run TestCLIDoc -update")
	}
}

// TestEveryVerbDocumented holds each command to the CLI's rules: a one-line
// description, an example, and flags of one type wherever a name recurs.
func TestEveryVerbDocumented(t *testing.T) {
	types := map[string]string{}
	where := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			if s.Name() == "help" || s.Name() == "completion" {
				continue
			}
			if s.Short == "" || strings.Contains(s.Short, "\n") {
				t.Errorf("%s: want a one-line description", s.CommandPath())
			}
			if s.Runnable() && !s.HasAvailableSubCommands() && strings.TrimSpace(s.Example) == "" {
				t.Errorf("%s: no example", s.CommandPath())
			}
			s.LocalFlags().VisitAll(func(f *pflag.Flag) {
				typ := f.Value.Type()
				if old, ok := types[f.Name]; ok && old != typ {
					t.Errorf("--%s is a %s in %s and a %s in %s", f.Name, old, where[f.Name], typ, s.CommandPath())
				}
				types[f.Name], where[f.Name] = typ, s.CommandPath()
			})
			walk(s)
		}
	}
	walk(newRoot())
}
