package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// An outcome comes back as it was kept: the object (its counts, none or
// empty included) and whether the create made it; a rendered answer of
// an earlier version comes back as it was; anything else is an error.
func TestOutcomeRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 30, 1, 123456000, time.UTC)
	for _, tc := range []struct {
		name string
		out  model.Outcome
	}{
		{"made, with counts", model.Outcome{Created: true, Object: model.Object{ID: 241294492511762325, Type: idcodec.TypePin, Version: 1,
			CreatedAt: at, UpdatedAt: at, Doc: []byte(`{"board_id":"1","active":true}`), Counts: []int64{0, 0, 3}}}},
		{"found, no counts", model.Outcome{Object: model.Object{ID: 241294629943640797, Type: idcodec.TypeUser, Version: 7,
			CreatedAt: at, UpdatedAt: at.Add(time.Hour), Doc: []byte(`{}`)}}},
		{"empty counts", model.Outcome{Created: true, Object: model.Object{ID: 1, Type: idcodec.TypeBoard, Version: 1,
			CreatedAt: at, UpdatedAt: at, Doc: []byte(`{"x":1}`), Counts: []int64{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeOutcome(encodeOutcome(nil, tc.out))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.out) {
				t.Fatalf("got %+v\nwant %+v", got, tc.out)
			}
		})
	}
	legacy := []byte(`{"status":201,"etag":"\"1\"","location":"/v1/pins/1","body":"{}"}`)
	if got, err := decodeOutcome(legacy); err != nil || string(got.Rendered) != string(legacy) {
		t.Fatalf("an earlier version's answer: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {}, {outcomeFormat, 1, 0}, {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := decodeOutcome(bad); err == nil {
			t.Fatalf("%v decodes", bad)
		}
	}
}
