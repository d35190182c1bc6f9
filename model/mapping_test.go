package model

import "testing"

// Colocated lists are exactly those kept by creating and deleting objects
// under their owner; the store reads their pages with a join on that basis.
func TestColocated(t *testing.T) {
	want := map[Mapping]bool{UserBoards: true, BoardPins: true, UserPins: true, PinComments: true, BoardSections: true, SectionPins: true}
	for _, m := range Mappings() {
		if m.Colocated() != want[m] {
			t.Errorf("%s: Colocated() = %v", m, m.Colocated())
		}
	}
	if Mapping(0).Colocated() || Mapping(99).Colocated() {
		t.Error("an unknown mapping is colocated")
	}
}
