package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Board sections. A section lives on its board's shard, as the board's
// pins do, so a section, its board and every pin of the board are one
// database and each change among them is one transaction:
//   - board_sections lists a board's sections highest sequence first, in
//     the order its owner sets: a new section (Objects.Create, as its
//     declaration says) goes last, a sequence below the lowest; Move
//     reorders;
//   - section_pins lists a section's pins, newest first, and each pin's
//     document names the one section it is in (section_id), so a pin is
//     in at most one section of its board;
//   - a section copies its board's secret flag, as the board's pins do
//     (secret.go), and its owner;
//   - deleting a section keeps its pins on the board, out of any section;
//     deleting a board deletes its sections; deleting a pin takes it out
//     of its section.

// Sections is what is particular to a board's sections: putting a pin in
// a section of its board or taking it out.
type Sections struct {
	*core
}

// SetPinSection puts the pin in section, a section of its board, or, with
// section 0, in none: in one transaction on the board's shard it leaves
// its old section's list, joins the new one's (newest first) and its
// document names the new one. Putting a pin where it already is changes
// nothing (its version stays). ENotFound when the pin or the section is
// not live; EInvalid when section is not a section of the pin's board.
func (s *Sections) SetPinSection(ctx context.Context, pin, section uint64) (model.Object, error) {
	const op = "store.SetPinSection"
	sh, local, err := s.route(op, pin, idcodec.TypePin)
	if err != nil {
		return model.Object{}, err
	}
	if section != 0 {
		if _, err := model.CheckID("section_id", section, idcodec.TypeSection); err != nil {
			return model.Object{}, model.Wrap(op, model.EInvalid, "section_id must be a section id", nil)
		}
	}
	var obj model.Object
	// Idempotent, so run again when a deadlock with a section's delete
	// (which locks the section, then its pins) picks it.
	err = s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		r, _, err := shardsql.ReadObjectCounted(ctx, tx, sh.DB, idcodec.TypePin, local, 0, shardsql.ForUpdate)
		d, err := liveDoc(op, idcodec.TypePin, r, err)
		if err != nil {
			return err
		}
		pd := d.(*model.PinDoc)
		if uint64(pd.SectionID) == section {
			obj = r.Object(sh.DB, idcodec.TypePin)
			return nil
		}
		if section != 0 {
			if err := checkSection(ctx, tx, op, sh, section, uint64(pd.BoardID)); err != nil {
				return err
			}
		}
		if err := unsection(ctx, tx, sh, pd, pin); err != nil {
			return err
		}
		at := shardsql.Now()
		if section != 0 {
			if _, err := shardsql.AddEdge(ctx, tx, sh.DB, model.SectionPins, section, pin, shardsql.Sequence(at)); err != nil {
				return err
			}
		}
		pd.SectionID = model.ID(section)
		b, err := s.marshalDoc(op, pd)
		if err != nil {
			return err
		}
		if err := shardsql.UpdateObject(ctx, tx, sh.DB, idcodec.TypePin, local, b, at); err != nil {
			return err
		}
		r.Doc, r.Flags, r.Version, r.Updated = b, model.FlagsOf(pd), r.Version+1, at
		obj = r.Object(sh.DB, idcodec.TypePin)
		return nil
	})
	return obj, err
}

// checkSection checks, in a transaction on board's shard sh, that section
// is a live section of board, and holds it (a share lock) until the
// transaction ends: ENotFound when it is not live, EInvalid when it is
// another board's.
func checkSection(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, section, board uint64) error {
	notOfBoard := model.Wrap(op, model.EInvalid, "section_id is not a section of the pin's board", nil)
	if int(idcodec.ShardOf(section)) != sh.DB.N {
		return notOfBoard // a board's sections are on its shard
	}
	_, d, err := readLive(ctx, tx, op, sh, idcodec.TypeSection, idcodec.LocalOf(section), shardsql.ShareLock)
	if err != nil {
		return err
	}
	if uint64(d.(*model.SectionDoc).BoardID) != board {
		return notOfBoard
	}
	return nil
}

// unsection takes pin (its document pd) off its section's list, if it is
// in one; pd is left as it was.
func unsection(ctx context.Context, tx *shardsql.Tx, sh topology.Shard, pd *model.PinDoc, pin uint64) error {
	if pd.SectionID == 0 {
		return nil
	}
	_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.SectionPins, uint64(pd.SectionID), pin)
	return err
}

// keepSectionPins is a deleted section's product rule: its pins stay on
// the board, out of any section (their documents name none), inside the
// section's delete transaction; the section's list and count go. In a
// board's delete its pins are gone first, so nothing is left to rewrite.
func keepSectionPins(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, section uint64, _ model.Doc, _ *deleted) error {
	_, err := rewriteList(ctx, tx, op, sh, model.SectionPins, section, shardsql.Now(), func(doc model.Doc) bool {
		pd := doc.(*model.PinDoc)
		if uint64(pd.SectionID) != section {
			return false
		}
		pd.SectionID = 0
		return true
	})
	if err != nil {
		return err
	}
	return shardsql.RemoveList(ctx, tx, sh.DB, model.SectionPins, section)
}

// rewriteList changes the documents of the live objects of from's list m
// (all on from's shard) inside tx: change edits a decoded document and
// reports whether it changed it; those it changed are written with their
// version raised. One statement reads the list, one per 500 objects locks
// and reads them, one per 500 writes those that changed. It returns how
// many changed.
func rewriteList(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, m model.Mapping, from uint64, at time.Time, change func(model.Doc) bool) (int, error) {
	entries, err := shardsql.ReadAllEntries(ctx, tx, sh.DB, m, from)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	locals := make([]uint64, len(entries))
	for i, e := range entries {
		locals[i] = idcodec.LocalOf(e.To)
	}
	typ := m.To()
	docs, err := shardsql.LockDocs(ctx, tx, sh.DB, typ, locals)
	if err != nil {
		return 0, err
	}
	changed := make(map[uint64][]byte, len(docs))
	for local, raw := range docs {
		d, err := model.DecodeDoc(typ, raw)
		if err != nil {
			return 0, model.Wrap(op, model.EInternal, "", err)
		}
		if !d.IsActive() || !change(d) {
			continue // deleted (and leaving the list), or unchanged
		}
		if changed[local], err = json.Marshal(d); err != nil {
			return 0, model.Wrap(op, model.EInternal, "", err)
		}
	}
	return len(changed), shardsql.UpdateDocs(ctx, tx, sh.DB, typ, changed, at)
}
