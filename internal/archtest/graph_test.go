package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// graphGroup is a row of docs/architecture.md's package-graph table.
type graphGroup struct {
	name     string
	patterns []string // a package path, or a prefix ending in "/"
	imports  []string // the groups it may import from
}

// readGraph parses the table under "## Package graph" in
// docs/architecture.md.
func readGraph(t *testing.T) []graphGroup {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "## Package graph")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## Package graph"`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var gs []graphGroup
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || strings.TrimSpace(cells[1]) == "group" || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		gs = append(gs, graphGroup{name: strings.TrimSpace(cells[1]), patterns: list(cells[2]), imports: list(cells[3])})
	}
	if len(gs) < 5 {
		t.Fatalf("docs/architecture.md's package graph has %d groups", len(gs))
	}
	return gs
}

// list splits a cell's comma-separated names.
func list(cell string) []string {
	var out []string
	for _, f := range strings.Split(cell, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// groupOf is the group whose pattern matches pkg (a module-relative path)
// most closely, and the pattern.
func groupOf(gs []graphGroup, pkg string) (group, pattern string) {
	for _, g := range gs {
		for _, p := range g.patterns {
			if (p == pkg || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) && len(p) > len(pattern) {
				group, pattern = g.name, p
			}
		}
	}
	return group, pattern
}

// TestPackageGraph: docs/architecture.md's package graph is what go list
// says. Every package is in a group, every import between groups is one
// the table lists, every listed import is made by some package, and every
// pattern names a package.
func TestPackageGraph(t *testing.T) {
	gs := readGraph(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string][]string{}
	for _, g := range gs {
		allowed[g.name] = g.imports
		for _, imp := range g.imports {
			if !slices.ContainsFunc(gs, func(o graphGroup) bool { return o.name == imp }) {
				t.Errorf("group %s imports from %s, which is no group", g.name, imp)
			}
		}
	}
	used := map[[2]string]bool{}
	matched := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		from, pat := groupOf(gs, pkg)
		if from == "" {
			t.Errorf("package %s is in no group of docs/architecture.md's package graph", pkg)
			continue
		}
		matched[pat] = true
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			to, pat := groupOf(gs, strings.TrimPrefix(imp, mod))
			matched[pat] = true
			if to == from || to == "" {
				continue
			}
			used[[2]string{from, to}] = true
			if !slices.Contains(allowed[from], to) {
				t.Errorf("%s (%s) imports %s (%s): not in docs/architecture.md's package graph", pkg, from, strings.TrimPrefix(imp, mod), to)
			}
		}
	}
	for _, g := range gs {
		for _, imp := range g.imports {
			if !used[[2]string{g.name, imp}] {
				t.Errorf("docs/architecture.md's package graph lets %s import from %s, which none of its packages does", g.name, imp)
			}
		}
		for _, p := range g.patterns {
			if !matched[p] {
				t.Errorf("docs/architecture.md's package graph names %s (group %s), which is no package", p, g.name)
			}
		}
	}
}
