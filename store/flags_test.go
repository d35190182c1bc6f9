package store

import (
	"fmt"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// Whether an object is live or secret comes from its row's flags, which
// the database derives from the document's fields by name: a document
// whose fields come in another order than the typed documents encode them
// (as a type declared in another order would write) is returned, hidden
// and counted as secret exactly as the canonical one. Reading the flags
// from the end of the encoding got both wrong: such a live pin was
// missing and such a secret pin was public.
func TestFlagsDoNotDependOnFieldOrder(t *testing.T) {
	s, _ := openTestWith(t, func(c *Config) { c.ObjectCache.Disabled = true }) // rows change behind the store's back
	ann := mustUser(t, s, "ann")
	board := mustBoard(t, s, ann)
	pin := mustPin(t, s, board)
	other := mustPin(t, s, board)
	sh, local, err := s.route("test", pin, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(doc string) {
		t.Helper()
		if _, err := sh.Host.DB.Exec("UPDATE "+sh.DB.Name+"."+shardsql.ObjectTable(idcodec.TypePin)+" SET doc = ? WHERE local_id = ?", doc, local); err != nil {
			t.Fatal(err)
		}
	}
	// read returns what every read path says of pin: whether it is found,
	// and its flags (the same on every path that finds it).
	read := func() (bool, model.Flags) {
		t.Helper()
		var found []model.Flags
		if o, err := s.Get(ctx, pin, idcodec.TypePin); err == nil {
			found = append(found, o.Flags)
		} else if !model.IsCode(err, model.ENotFound) {
			t.Fatal(err)
		}
		objs, err := s.GetMany(ctx, []uint64{other, pin}, idcodec.TypePin)
		if err != nil {
			t.Fatal(err)
		}
		_, listed, err := s.ListObjects(ctx, model.BoardPins, board, model.Page{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range append(objs, listed...) {
			if o.ID == pin {
				found = append(found, o.Flags)
			}
		}
		switch {
		case len(found) == 0:
			return false, 0
		case len(found) != 3 || found[1] != found[0] || found[2] != found[0]:
			t.Fatalf("the read paths disagree: %v", found)
		}
		return true, found[0]
	}
	if ok, f := read(); !ok || f != model.FlagActive {
		t.Fatalf("the canonical live pin: found %v, flags %b", ok, f)
	}
	rewrite(fmt.Sprintf(`{"active":true,"secret":true,"owner_id":"%d","board_id":"%d"}`, ann, board))
	if ok, f := read(); !ok || !f.Active() || !f.Secret() {
		t.Fatalf("a live secret pin whose fields come in another order: found %v, flags %b", ok, f)
	}
	rewrite(fmt.Sprintf(`{"active":false,"board_id":"%d","owner_id":"%d","data":{"active":true}}`, board, ann))
	if ok, f := read(); ok {
		t.Fatalf("a deleted pin whose fields come in another order is returned (flags %b)", f)
	}
}
