package binaryenv

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Direct finds the variables a package reads itself, outside any config struct: string literals passed to
// os.Getenv / os.LookupEnv, or to a function of the package that hands its first parameter to one of them (an
// `envOr(name, fallback)` helper).
func Direct(dir string) (Env, error) {
	files, err := parseDir(dir)
	if err != nil {
		return Env{}, err
	}
	wrappers := envWrappers(files)
	out := Env{Known: map[string]bool{}}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			id, isIdent := call.Fun.(*ast.Ident)
			if !isOSLookup(call) && !(isIdent && wrappers[id.Name]) {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil {
					out.Known[name] = true
				}
			}
			return true
		})
	}
	return out, nil
}

// parseDir parses the package's non-test Go files.
func parseDir(dir string) ([]*ast.File, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	return files, nil
}

// envWrappers names the package's functions that pass their first parameter to os.Getenv / os.LookupEnv.
func envWrappers(files []*ast.File) map[string]bool {
	wrappers := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Type.Params == nil || len(fn.Type.Params.List) == 0 ||
				len(fn.Type.Params.List[0].Names) == 0 {
				continue
			}
			param := fn.Type.Params.List[0].Names[0].Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && isOSLookup(call) && len(call.Args) > 0 {
					if id, ok := call.Args[0].(*ast.Ident); ok && id.Name == param {
						wrappers[fn.Name.Name] = true
					}
				}
				return true
			})
		}
	}
	return wrappers
}

func isOSLookup(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv")
}
