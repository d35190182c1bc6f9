package reshard

import (
	"fmt"
	"testing"
)

func TestKeyCond(t *testing.T) {
	tb := tableInfo{name: "m", cols: []string{"from_id", "to_id", "sequence"}, pk: []int{0, 1}}
	where, args := tb.keyCond([]any{1, 2}, []any{3, 4})
	want := " WHERE ((`from_id` > ?) OR (`from_id` = ? AND `to_id` > ?)) AND ((`from_id` < ?) OR (`from_id` = ? AND `to_id` < ?) OR (`from_id` = ? AND `to_id` = ?))"
	if where != want || fmt.Sprint(args) != "[1 1 2 3 3 4 3 4]" {
		t.Fatalf("got %s %v", where, args)
	}
	if w, a := tb.keyCond(nil, nil); w != "" || a != nil {
		t.Fatalf("open range: %q %v", w, a)
	}
}
