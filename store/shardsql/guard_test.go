package shardsql

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// Every statement of this package that writes an object table or
// mapping_counts runs through Tx.change, which records the objects it
// changes: a function that names those tables may read them, but may not
// send a statement of its own (ExecContext). InsertObject is the one
// exception: a new row has no cached copy to drop.
func TestObjectWritesGoThroughChange(t *testing.T) {
	exempt := map[string]bool{"change": true, "changeLater": true, "InsertObject": true}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || exempt[fn.Name.Name] {
				continue
			}
			names := func(n ast.Node) bool { // names an object table or mapping_counts
				found := false
				ast.Inspect(n, func(n ast.Node) bool {
					if id, ok := n.(*ast.Ident); ok && (id.Name == "objectTables" || id.Name == "countsTable") {
						found = true
					}
					return !found
				})
				return found
			}
			if !names(fn.Body) {
				continue
			}
			checked++
			// A statement sent with ExecContext whose text names the
			// tables, or is built (a strings.Builder) in a function that
			// names them, writes them behind Tx.change's back.
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				// later queues a statement for the transaction's next
				// round trip (later.go): a write all the same.
				if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "later" {
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != "ExecContext" && sel.Sel.Name != "Exec" {
						return true
					}
				}
				for _, arg := range call.Args {
					built := false
					ast.Inspect(arg, func(n ast.Node) bool {
						if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "String" {
							built = true
						}
						return true
					})
					if names(arg) || built {
						t.Errorf("%s: %s writes an object table or mapping_counts without Tx.change", fset.Position(call.Pos()), fn.Name.Name)
						break
					}
				}
				return true
			})
		}
	}
	if checked < 5 {
		t.Fatalf("only %d functions name the object tables or mapping_counts: the check is not looking", checked)
	}
}
