package api

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

func TestListSkipsGoneObjects(t *testing.T) {
	st := &fakeStore{
		list: func(_ context.Context, m model.Mapping, from uint64, p model.Page) (model.List, error) {
			if m != model.BoardPins || p.Limit != 2 || !p.Desc {
				t.Errorf("List(%v, %+v)", m, p)
			}
			return model.List{Entries: []model.Entry{{To: 68719476738}, {To: 68719476737}}, NextCursor: "next", Count: 7}, nil
		},
		getMany: func(_ context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error) {
			if len(ids) != 2 || typ != idcodec.TypePin {
				t.Errorf("GetMany(%v, %v)", ids, typ)
			}
			return []model.Object{{ID: 68719476737, Type: idcodec.TypePin, Version: 1, Doc: []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + vecUser + `","active":true}`)}}, nil
		},
	}
	s, _, _ := newTestServer(t, st)
	w := do(s, "GET", "/v1/boards/"+vecBoard+"/pins?limit=2", "")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var l struct {
		Items      []Pin  `json:"items"`
		NextCursor string `json:"next_cursor"`
		Count      *int64 `json:"count"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].ID != "68719476737" || l.NextCursor != "next" || l.Count == nil || *l.Count != 7 {
		t.Fatalf("%s", w.Body)
	}
}
