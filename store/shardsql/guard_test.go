package shardsql

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writeTarget is the table a statement's text writes: {table} or a name.
var writeTarget = regexp.MustCompile(`^(?:INSERT(?: IGNORE)? INTO|UPDATE|DELETE FROM|REPLACE INTO) \{db\}\.(\{table\}|\w+)`)

// writeVerb begins a statement that writes.
var writeVerb = regexp.MustCompile(`^(?i)(INSERT|UPDATE|DELETE|REPLACE)\b`)

// Every statement of this package that writes an object table or
// mapping_counts runs through Tx.change, which records the objects it
// changes. The statements are declared once (stmts.go): the test finds
// those that write these tables among the declarations, and checks that
// a function naming one sends it only through Tx.change or
// Tx.changeLater, never with a statement of its own (ExecContext, later);
// and that no function writes any table with a text of its own.
// InsertObject and InsertNew are the exceptions: a new row has no
// cached copy to drop.
func TestObjectWritesGoThroughChange(t *testing.T) {
	exempt := map[string]bool{"change": true, "changeLater": true, "InsertObject": true, "InsertNew": true}
	objectTable := map[string]bool{"mapping_counts": true}
	for _, name := range objectTables {
		if name != "" {
			objectTable[name] = true
		}
	}
	// writes reports whether text, declared with decl, writes an object
	// table or mapping_counts.
	writes := func(decl, text string) bool {
		m := writeTarget.FindStringSubmatch(text)
		if m == nil {
			return false
		}
		if m[1] == "{table}" {
			return strings.HasPrefix(decl, "perType")
		}
		return objectTable[m[1]]
	}
	fset, files := parsePackage(t)
	// The declared statements that write the tables, by variable.
	declared := declaredStatements(files, writes)
	if len(declared) < 5 {
		t.Fatalf("only %d declared statements write the object tables or mapping_counts: the check is not looking", len(declared))
	}
	sentByChange := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || exempt[fn.Name.Name] {
				continue
			}
			names := false // the function names a declared statement that writes the tables
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && declared[id.Name] {
					names = true
				}
				return !names
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit: // a write of its own, not declared once
					if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && writeVerb.MatchString(s) {
						t.Errorf("%s: %s writes with a statement not declared once: %q", fset.Position(n.Pos()), fn.Name.Name, s)
					}
				case *ast.CallExpr:
					viaChange, sends := false, false
					switch fun := n.Fun.(type) {
					case *ast.Ident:
						sends = fun.Name == "later"
					case *ast.SelectorExpr:
						viaChange = fun.Sel.Name == "change" || fun.Sel.Name == "changeLater"
						sends = slices.Contains([]string{"ExecContext", "Exec", "QueryContext", "QueryRowxContext", "QueryxContext", "QueryRowContext"}, fun.Sel.Name)
					}
					if !viaChange && !sends {
						return true
					}
					for _, arg := range n.Args {
						ast.Inspect(arg, func(n ast.Node) bool {
							// A text built (a strings.Builder) in a function
							// that names such a statement may hold it.
							if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "String" && names && !viaChange {
								t.Errorf("%s: %s sends a built statement beside one that writes an object table or mapping_counts, without Tx.change", fset.Position(s.Pos()), fn.Name.Name)
							}
							id, ok := n.(*ast.Ident)
							if !ok || !declared[id.Name] {
								return true
							}
							if viaChange {
								sentByChange[id.Name] = true
							} else {
								t.Errorf("%s: %s sends %s, which writes an object table or mapping_counts, without Tx.change", fset.Position(id.Pos()), fn.Name.Name, id.Name)
							}
							return true
						})
					}
				}
				return true
			})
		}
	}
	for name := range declared {
		if !sentByChange[name] && name != "insertObject" && name != "insertNew" {
			t.Errorf("%s writes an object table or mapping_counts and is sent by no Tx.change", name)
		}
	}
}

// parsePackage parses the package's files, tests left out.
func parsePackage(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// declaredStatements returns the package-level variables declared as
// decl(text) (declare, perMapping, perType …) for which keep(decl, text)
// holds.
func declaredStatements(files []*ast.File, keep func(decl, text string) bool) map[string]bool {
	declared := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					call, ok := v.(*ast.CallExpr)
					if !ok || len(call.Args) != 1 {
						continue
					}
					if fn, ok := call.Fun.(*ast.Ident); ok && keep(fn.Name, literal(call.Args[0])) {
						declared[vs.Names[i].Name] = true
					}
				}
			}
		}
	}
	return declared
}

// literal is the text of a string constant expression: literals joined
// by +, with the parts that are not literals left out.
func literal(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		s, _ := strconv.Unquote(e.Value)
		return s
	case *ast.BinaryExpr:
		return literal(e.X) + literal(e.Y)
	}
	return ""
}
