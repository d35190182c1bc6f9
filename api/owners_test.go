package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
)

// The owners answer is written by hand: it must be the JSON an
// OwnersResponse encodes to, with found and missing pins in request order,
// duplicates once.
func TestOwnersAnswerInRequestOrder(t *testing.T) {
	a := idcodec.MustEncode(5, idcodec.TypePin, 7)
	b := idcodec.MustEncode(9, idcodec.TypePin, 1)
	c := idcodec.MustEncode(1, idcodec.TypePin, 3)
	st := &fakeStore{owners: func(_ context.Context, pins []uint64) (map[uint64]uint64, error) {
		if !slices.Equal(pins, []uint64{a, b, c}) {
			t.Errorf("looked up %v", pins)
		}
		return map[uint64]uint64{c: 42, a: 43}, nil
	}}
	s, _, _ := newTestServer(t, st)
	ids := fmt.Sprintf(`{"ids":["%d","%d","%d","%d"]}`, a, b, c, a)
	w := do(s, "POST", "/v1/pins/owners", ids, "Content-Type", "application/json")
	want := fmt.Sprintf(`{"owners":{"%d":"43","%d":"42"},"not_found":["%d"]}`+"\n", a, c, b)
	if w.Code != 200 || w.Body.String() != want {
		t.Fatalf("%d %s, want %s", w.Code, w.Body, want)
	}
	var resp OwnersResponse
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Owners) != 2 || resp.Owners[idString(a)] != "43" {
		t.Fatalf("%+v %v", resp, err)
	}
	// An escaped (yet valid) ID string takes the slow path to the same answer.
	sa := idString(a)
	escaped := fmt.Sprintf(`{"ids":["\u003%c%s","%d","%d"]}`, sa[0], sa[1:], b, c)
	w = do(s, "POST", "/v1/pins/owners", escaped, "Content-Type", "application/json")
	if w.Body.String() != want {
		t.Fatalf("second answer %s", w.Body)
	}
}
