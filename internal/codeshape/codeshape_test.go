// Package codeshape holds the repository's Go, the tooling module's (tests/) too, to the house limits on code shape,
// so they stay true as it grows.
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, from its `func` line to its closing brace.
const maxFuncLines = 50

// exempt lists functions allowed over the limit, by slash path relative to the module root and name, with the reason.
var exempt = map[string]string{}

// skipDirs are directories that hold no code of this module: build output, local data, test fixtures, vendored code.
var skipDirs = []string{".bin", ".data", ".git", "testdata", "vendor", "node_modules"}

// TestFunctionLength fails with every product function longer than maxFuncLines, so none creeps back in.
func TestFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	var long []string
	used := map[string]bool{}
	for _, path := range productFiles(t, root) {
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, fn := range funcLengths(t, path) {
			if fn.lines <= maxFuncLines {
				continue
			}
			key := rel + ":" + fn.name
			if _, ok := exempt[key]; ok {
				used[key] = true
				continue
			}
			long = append(long, key+" "+strconv.Itoa(fn.lines))
		}
	}
	slices.Sort(long)
	if len(long) > 0 {
		t.Errorf("%d functions over %d lines (split them into functions with one concern each):\n%s",
			len(long), maxFuncLines, strings.Join(long, "\n"))
	}
	for key, reason := range exempt {
		if !used[key] {
			t.Errorf("exemption %s (%s) is stale: the function is gone or within %d lines; remove it", key, reason, maxFuncLines)
		}
	}
}

// moduleRoot walks up from the test's directory to the go.mod, so the test checks the whole module wherever it runs.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// productFiles lists the non-test, hand-written .go files under the module root, nested modules (tests/) included.
func productFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && slices.Contains(skipDirs, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no .go files under %s", root)
	}
	return files
}

// funcLength is one function's name and its length in lines.
type funcLength struct {
	name  string
	lines int
}

// funcLengths returns the length of each function with a body in a hand-written file; generated files have none.
func funcLengths(t *testing.T, path string) []funcLength {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	if ast.IsGenerated(f) {
		return nil
	}
	var out []funcLength
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		out = append(out, funcLength{name: funcName(fd), lines: lines})
	}
	return out
}

// funcName names a function as it is read in the file: Name, or Type.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch generic := typ.(type) {
	case *ast.IndexExpr:
		typ = generic.X
	case *ast.IndexListExpr:
		typ = generic.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
