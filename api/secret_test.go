package api

import (
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// A secret pin is hidden from others by the flags its row carries,
// whatever the order of its document's fields: one whose JSON ends
// unlike the typed documents' encoding is hidden all the same.
func TestVisibleFollowsFlagsNotFieldOrder(t *testing.T) {
	ownerID, otherID := idcodec.MustEncode(1, idcodec.TypeUser, 7), idcodec.MustEncode(1, idcodec.TypeUser, 8)
	reordered := []byte(`{"active":true,"secret":true,"owner_id":"` + idString(ownerID) + `","board_id":"` + vecBoard + `"}`)
	pin := model.Object{ID: idcodec.MustEncode(1, idcodec.TypePin, 1), Type: idcodec.TypePin, Version: 1, Doc: reordered, Flags: storedFlags(idcodec.TypePin, reordered)}
	if !pin.Flags.Secret() {
		t.Fatalf("the reordered secret pin carries flags %b", pin.Flags)
	}
	if got := visible([]model.Object{pin}, otherID); len(got) != 0 {
		t.Fatalf("another user sees the secret pin: %s", got[0].Doc)
	}
	if got := visible([]model.Object{pin}, ownerID); len(got) != 1 {
		t.Fatal("its owner does not see the secret pin")
	}
	if got := visible([]model.Object{pin}, 0); len(got) != 1 {
		t.Fatal("a service token does not see the secret pin")
	}
}
