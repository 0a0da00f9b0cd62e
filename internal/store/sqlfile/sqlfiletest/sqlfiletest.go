// Package sqlfiletest holds the checks the dialects' tests run on their
// named statements: the golden files of every statement as prepared, and
// that the Go code names only statements that exist and uses every one.
package sqlfiletest

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/sql/<Name>.sql from the statements as prepared")

// Golden compares each statement of stmts (name -> text as prepared) with
// dir/<name>.sql and fails, naming the file, on a difference, a missing
// file or a file no statement has. With -update it rewrites dir to match.
func Golden(t *testing.T, dir string, stmts map[string]string) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		for name, text := range stmts {
			if err := os.WriteFile(filepath.Join(dir, name+".sql"), []byte(text+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, text := range stmts {
		file := filepath.Join(dir, name+".sql")
		b, err := os.ReadFile(file) // #nosec G304 -- a file of the package's own testdata
		if err != nil {
			t.Errorf("%s: %v (go test -run TestSQLGolden -update writes it)", file, err)
			continue
		}
		if string(b) != text+"\n" {
			t.Errorf("%s differs from statement %s as prepared (review the change, then go test -run TestSQLGolden -update):\n%s",
				file, name, firstDifference(string(b), text+"\n"))
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := stmts[strings.TrimSuffix(filepath.Base(f), ".sql")]; !ok {
			t.Errorf("%s: no statement has this name any more (go test -run TestSQLGolden -update removes it)", f)
		}
	}
}

// firstDifference describes the first line at which golden and got differ.
func firstDifference(golden, got string) string {
	g, n := strings.Split(golden, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(g), len(n)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(n) {
			b = n[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n  golden:   " + a + "\n  prepared: " + b
		}
	}
	return "(only in line endings)"
}

// Source is a directory of Go code that runs named statements: the
// functions of Runners (a name -> the position of the statement name among
// its arguments).
type Source struct {
	Dir     string
	Runners map[string]int
}

// SharedRunners are the runners of package store's shared code (the
// store.Querier methods and the helpers that take a statement name), for
// a dialect's Source of "..".
var SharedRunners = map[string]int{"QueryRow": 1, "Query": 1, "Exec": 1, "queryAll": 2}

// Names checks the non-test Go files of the packages in sources against
// the statement names: every call of a function in a source's runners
// that passes a string literal must name a statement, and every
// statement must be named by some string literal of the sources (a call
// or a constant).
func Names(t *testing.T, names []string, sources ...Source) {
	t.Helper()
	literals := map[string]bool{}
	for _, src := range sources {
		namesIn(t, src.Dir, names, src.Runners, literals)
	}
	for _, name := range names {
		if !literals[name] {
			t.Errorf("statement %s is defined but the package never names it", name)
		}
	}
}

// namesIn checks the calls of runners in the Go files of dir (see Names)
// and adds the string literals of those files to literals.
func namesIn(t *testing.T, dir string, names []string, runners map[string]int, literals map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
					literals[s] = true
				}
			case *ast.CallExpr:
				var fn string
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				i, ok := runners[fn]
				if !ok || i >= len(n.Args) {
					return true
				}
				if lit, ok := n.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && !slices.Contains(names, s) {
						t.Errorf("%s: %s names statement %q, which no sql/*.sql block defines", fset.Position(lit.Pos()), fn, s)
					}
				}
			}
			return true
		})
	}
}
