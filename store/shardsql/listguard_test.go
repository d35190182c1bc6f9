package shardsql

import (
	"go/ast"
	"maps"
	"regexp"
	"slices"
	"testing"

	"github.com/pinstore/pinstore/model"
)

// rowWrite begins a statement that adds, removes or changes rows of a
// table.
var rowWrite = regexp.MustCompile(`^(?:INSERT(?: IGNORE)? INTO|DELETE FROM|REPLACE INTO|UPDATE) \{db\}\.(\{table\}|\w+)`)

// Every statement that adds, removes or reorders rows of a list's table is
// sent by AddEdge, AddEdges, RemoveEdge, RemoveList, SetSequence or
// ShiftDown, and each of them records the list's owner as changed through
// Tx.change or Tx.changeLater (the first four by changing the list's
// count): so no row of a list comes, goes or moves without its owner's
// cached copy, and the edges and first pages cached with it (package
// objcache), being invalidated after the commit.
func TestListRowWritesRecordTheirOwner(t *testing.T) {
	listTable := map[string]bool{"{table}": true}
	for _, m := range model.Mappings() {
		listTable[m.Table()] = true
	}
	_, files := parsePackage(t)
	// The statements that add, remove or reorder list rows. perListTable's are
	// shared with the feed table, and none of them writes.
	declared := declaredStatements(files, func(decl, text string) bool {
		m := rowWrite.FindStringSubmatch(text)
		return (decl == "perMapping" || decl == "declare") && m != nil && listTable[m[1]]
	})
	if len(declared) < 3 {
		t.Fatalf("only %v add or remove list rows: the check is not looking", slices.Sorted(maps.Keys(declared)))
	}
	writers := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			names, records := false, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					names = names || declared[n.Name]
				case *ast.SelectorExpr:
					records = records || n.Sel.Name == "change" || n.Sel.Name == "changeLater"
				}
				return true
			})
			if !names {
				continue
			}
			writers[fn.Name.Name] = true
			if !records {
				t.Errorf("%s adds, removes or reorders list rows without recording their owner (Tx.change)", fn.Name.Name)
			}
		}
	}
	if want := []string{"AddEdge", "AddEdges", "RemoveEdge", "RemoveList", "SetSequence", "ShiftDown"}; !slices.Equal(slices.Sorted(maps.Keys(writers)), want) {
		t.Errorf("list rows are added, removed or reordered by %v, want only %v", slices.Sorted(maps.Keys(writers)), want)
	}
}
