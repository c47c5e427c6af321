package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Size bars (docs/architecture.md): no non-test Go file over maxFileLines
// lines and no function over maxFuncLines, outside vendored code
// (third_party). The list of functions still over the bar only shrinks.
const (
	maxFileLines = 700
	maxFuncLines = 100
)

var longFuncs = map[string]bool{
	"bench/sim/slowreplay/main.go main": true,
}

// TestSizes: every non-test Go file and function keeps to the size bars.
func TestSizes(t *testing.T) {
	root := "../.."
	fset := token.NewFileSet()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "third_party" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := strings.Count(string(b), "\n"); n > maxFileLines {
			t.Errorf("%s: %d lines (bar %d)", rel, n, maxFileLines)
		}
		f, err := parser.ParseFile(fset, p, b, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			key := rel + " " + fd.Name.Name
			if n > maxFuncLines {
				seen[key] = true
				if !longFuncs[key] {
					t.Errorf("%s: %s is %d lines (bar %d)", rel, fd.Name.Name, n, maxFuncLines)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k := range longFuncs {
		if !seen[k] {
			t.Errorf("%s keeps to the bar now: take it off longFuncs", k)
		}
	}
}
