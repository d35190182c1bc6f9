package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

var objectTables = [...]string{idcodec.TypePin: "pins", idcodec.TypeBoard: "boards", idcodec.TypeUser: "users", idcodec.TypeComment: "comments"}

// resolve validates id by model.CheckID and returns its route: a malformed
// id, an unknown type or a shard outside the configured range is EInvalid;
// an id of a known type other than want is ENotFound (the caller asked for
// a pin and there is no such pin).
func (s *Store) resolve(op string, id uint64, want idcodec.Type) (shard, uint64, error) {
	p, err := model.CheckID("id", id, want)
	if err != nil {
		return shard{}, 0, classify(op, nil, err)
	}
	sh, err := s.topo.Load().route(int(p.Shard))
	if err != nil {
		return shard{}, 0, model.Wrap(op, model.EInvalid, model.ErrorMessage(err), nil)
	}
	return sh, p.Local, nil
}

func notFound(op string, typ idcodec.Type) error {
	return model.Wrap(op, model.ENotFound, typ.String()+" not found", nil)
}

// inTx runs fn in a transaction on the shard's host and commits; any error
// rolls back and is classified (driver errors become *model.Error naming
// the host).
func (s *Store) inTx(ctx context.Context, op string, sh shard, fn func(tx *sqlx.Tx) error) error {
	if err := sh.writable(op); err != nil {
		return err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	tx, err := sh.host.db.BeginTxx(ctx, nil)
	if err != nil {
		return classify(op, sh.host, err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return classify(op, sh.host, err)
	}
	return classify(op, sh.host, tx.Commit())
}

func (s *Store) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.QueryTimeout)
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// insertObject inserts doc into the shard and composes the new object's ID.
// A local id past the 36 bits an ID can carry is EShardFull; the caller's
// transaction then rolls the row back.
func insertObject(ctx context.Context, x sqlx.ExecerContext, sh shard, typ idcodec.Type, doc []byte, at time.Time) (model.Object, error) {
	res, err := x.ExecContext(ctx, "INSERT INTO "+sh.db+"."+objectTables[typ]+" (doc, version, created_at, updated_at) VALUES (?, 1, ?, ?)", doc, at, at)
	if err != nil {
		return model.Object{}, err
	}
	local, err := res.LastInsertId()
	if err != nil {
		return model.Object{}, err
	}
	id, err := idcodec.Encode(uint32(sh.n), typ, uint64(local))
	if err != nil {
		return model.Object{}, model.Errorf(model.EShardFull, "shard %d has no %s ids left", sh.n, typ)
	}
	return model.Object{ID: id, Type: typ, Version: 1, CreatedAt: at, UpdatedAt: at, Doc: doc}, nil
}

// row is an object as one shard table holds it.
type row struct {
	local   uint64
	doc     []byte
	version int64
	created time.Time
	updated time.Time
}

func (r row) object(sh shard, typ idcodec.Type) model.Object {
	return model.Object{ID: idcodec.MustEncode(uint32(sh.n), typ, r.local), Type: typ, Version: r.version, CreatedAt: r.created, UpdatedAt: r.updated, Doc: r.doc}
}

// readRow reads one object row; lock is "", " FOR UPDATE" or " LOCK IN SHARE MODE".
// A missing row is sql.ErrNoRows.
func readRow(ctx context.Context, q sqlx.QueryerContext, sh shard, typ idcodec.Type, local uint64, lock string) (row, error) {
	r := row{local: local}
	err := q.QueryRowxContext(ctx, "SELECT doc, version, created_at, updated_at FROM "+sh.db+"."+objectTables[typ]+" WHERE local_id = ?"+lock, local).
		Scan(&r.doc, &r.version, &r.created, &r.updated)
	return r, err
}

// readLive reads and decodes a live object inside a transaction.
func readLive(ctx context.Context, q sqlx.QueryerContext, op string, sh shard, typ idcodec.Type, local uint64, lock string) (row, model.Doc, error) {
	r, err := readRow(ctx, q, sh, typ, local, lock)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil, notFound(op, typ)
	}
	if err != nil {
		return r, nil, err
	}
	d, err := model.DecodeDoc(typ, r.doc)
	if err != nil {
		return r, nil, model.Wrap(op, model.EInternal, "", err)
	}
	if !d.IsActive() {
		return r, nil, notFound(op, typ)
	}
	return r, d, nil
}

// encodeDoc validates d and encodes it for storage.
func (s *Store) encodeDoc(op string, d model.Doc) ([]byte, error) {
	if err := d.Validate(s.cfg.Limits); err != nil {
		return nil, err
	}
	return s.marshalDoc(op, d)
}

// marshalDoc encodes a validated d, refusing one over the stored limit.
func (s *Store) marshalDoc(op string, d model.Doc) ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, model.Wrap(op, model.EInvalid, "document does not encode", err)
	}
	if len(b) > s.cfg.MaxDocBytes {
		return nil, model.Wrap(op, model.ETooLarge, "document is larger than the limit", nil)
	}
	return b, nil
}

// CreateUser places a new user on a random shard among the open ranges.
func (s *Store) CreateUser(ctx context.Context, doc model.UserDoc) (model.Object, error) {
	const op = "store.CreateUser"
	doc.Active = true
	b, err := s.encodeDoc(op, &doc)
	if err != nil {
		return model.Object{}, err
	}
	t := s.topo.Load()
	sh, _ := t.route(t.open[rand.IntN(len(t.open))])
	var obj model.Object
	err = s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		obj, err = insertObject(ctx, tx, sh, idcodec.TypeUser, b, now())
		return err
	})
	return obj, err
}

// CreateBoard places the board on its owner's shard and adds it to the
// owner's user_boards in the same transaction. ENotFound when the owner
// does not exist.
func (s *Store) CreateBoard(ctx context.Context, doc model.BoardDoc) (model.Object, error) {
	const op = "store.CreateBoard"
	doc.Active = true
	b, err := s.encodeDoc(op, &doc)
	if err != nil {
		return model.Object{}, err
	}
	sh, ownerLocal, err := s.resolve(op, uint64(doc.OwnerID), idcodec.TypeUser)
	if err != nil {
		return model.Object{}, err
	}
	var obj model.Object
	err = s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		if _, _, err := readLive(ctx, tx, op, sh, idcodec.TypeUser, ownerLocal, " LOCK IN SHARE MODE"); err != nil {
			return err
		}
		at := now()
		if obj, err = insertObject(ctx, tx, sh, idcodec.TypeBoard, b, at); err != nil {
			return err
		}
		_, err = addEdge(ctx, tx, sh, model.UserBoards, uint64(doc.OwnerID), obj.ID, at.UnixMilli())
		return err
	})
	return obj, err
}

// CreatePin places the pin on its board's shard, owned by the board's
// owner, and adds it to board_pins and user_pins in the same transaction;
// then it caches the owner. actor, when not 0, is the user the request
// acts as: the board must be theirs, or the pin is refused with
// EForbidden, checked on the board row the transaction reads. EInvalid
// when board_id is no board's id; ENotFound when the board does not exist.
func (s *Store) CreatePin(ctx context.Context, doc model.PinDoc, actor uint64) (model.Object, error) {
	const op = "store.CreatePin"
	doc.Active = true
	if err := doc.Validate(s.cfg.Limits); err != nil {
		return model.Object{}, err
	}
	sh, boardLocal, err := s.resolve(op, uint64(doc.BoardID), idcodec.TypeBoard)
	if err != nil {
		return model.Object{}, err
	}
	var obj model.Object
	var seq int64
	err = s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		_, bd, err := readLive(ctx, tx, op, sh, idcodec.TypeBoard, boardLocal, " LOCK IN SHARE MODE")
		if err != nil {
			return err
		}
		doc.OwnerID = bd.(*model.BoardDoc).OwnerID
		if actor != 0 && uint64(doc.OwnerID) != actor {
			return model.Wrap(op, model.EForbidden, "a user token may only pin on its own user's boards", nil)
		}
		b, err := s.marshalDoc(op, &doc)
		if err != nil {
			return err
		}
		at := now()
		if obj, err = insertObject(ctx, tx, sh, idcodec.TypePin, b, at); err != nil {
			return err
		}
		seq = at.UnixMilli()
		if err = addEdges(ctx, tx, sh, obj.ID, seq, listEntry{model.BoardPins, uint64(doc.BoardID)}, listEntry{model.UserPins, uint64(doc.OwnerID)}); err != nil {
			return err
		}
		// Durable until the fan-out to followers' feeds is written (feed.go).
		_, err = tx.ExecContext(ctx, "INSERT INTO "+sh.db+".feed_outbox (pin_id, author_id, sequence, created_at) VALUES (?, ?, ?, ?)", obj.ID, uint64(doc.OwnerID), seq, at)
		return err
	})
	if err == nil {
		s.owners.set(ctx, obj.ID, uint64(doc.OwnerID))
		s.feed.enqueue(feedJob{pin: obj.ID, author: uint64(doc.OwnerID), seq: seq, outbox: true})
	}
	return obj, err
}

// CreateComment places the comment on its pin's shard and adds it to
// pin_comments. ENotFound when the pin or the author does not exist.
func (s *Store) CreateComment(ctx context.Context, doc model.CommentDoc) (model.Object, error) {
	const op = "store.CreateComment"
	doc.Active = true
	b, err := s.encodeDoc(op, &doc)
	if err != nil {
		return model.Object{}, err
	}
	if _, err := s.Get(ctx, uint64(doc.AuthorID), idcodec.TypeUser); err != nil {
		return model.Object{}, err
	}
	sh, pinLocal, err := s.resolve(op, uint64(doc.PinID), idcodec.TypePin)
	if err != nil {
		return model.Object{}, err
	}
	var obj model.Object
	err = s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		if _, _, err := readLive(ctx, tx, op, sh, idcodec.TypePin, pinLocal, " LOCK IN SHARE MODE"); err != nil {
			return err
		}
		at := now()
		if obj, err = insertObject(ctx, tx, sh, idcodec.TypeComment, b, at); err != nil {
			return err
		}
		_, err = addEdge(ctx, tx, sh, model.PinComments, uint64(doc.PinID), obj.ID, at.UnixMilli())
		return err
	})
	return obj, err
}

// Get returns the live object id of type typ. ENotFound when it is
// unknown, deleted or of another type; EInvalid when id is malformed.
func (s *Store) Get(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
	const op = "store.Get"
	sh, local, err := s.resolve(op, id, typ)
	if err != nil {
		return model.Object{}, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	p := pointRead{sh: sh, typ: typ, local: local}
	err = s.pointRead(ctx, &p)
	r := p.r
	if errors.Is(err, sql.ErrNoRows) || err == nil && !model.ActiveOf(r.doc) {
		return model.Object{}, notFound(op, typ)
	}
	if err != nil {
		return model.Object{}, classify(op, sh.host, err)
	}
	return r.object(sh, typ), nil
}

// Update reads the object, calls mutate with its document inside the
// shard transaction, validates what mutate returns and writes it with
// version+1. ifVersion 0 is unconditional; otherwise a different stored
// version is EVersion. The fields that place the object (Refs) and the
// active flag may not change (EInvalid).
func (s *Store) Update(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func(doc []byte) ([]byte, error)) (model.Object, error) {
	const op = "store.Update"
	sh, local, err := s.resolve(op, id, typ)
	if err != nil {
		return model.Object{}, err
	}
	var obj model.Object
	err = s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		r, old, err := readLive(ctx, tx, op, sh, typ, local, " FOR UPDATE")
		if err != nil {
			return err
		}
		if ifVersion != 0 && r.version != ifVersion {
			return model.Wrap(op, model.EVersion, "the object has changed (version "+itoa(r.version)+")", nil)
		}
		raw, err := mutate(r.doc)
		if err != nil {
			return err
		}
		nd, err := model.DecodeDoc(typ, raw)
		if err != nil {
			return err
		}
		if !nd.IsActive() {
			return model.Wrap(op, model.EInvalid, "active cannot be changed; delete the object instead", nil)
		}
		if nd.Refs() != old.Refs() {
			return model.Wrap(op, model.EInvalid, "the ids that place an object cannot change", nil)
		}
		b, err := s.encodeDoc(op, nd)
		if err != nil {
			return err
		}
		at := now()
		if _, err := tx.ExecContext(ctx, "UPDATE "+sh.db+"."+objectTables[typ]+" SET doc = ?, version = version + 1, updated_at = ? WHERE local_id = ?", b, at, local); err != nil {
			return err
		}
		r.doc, r.version, r.updated = b, r.version+1, at
		obj = r.object(sh, typ)
		return nil
	})
	return obj, err
}

// markDeleted soft-deletes one object in tx and returns its last live doc.
func (s *Store) markDeleted(ctx context.Context, tx *sqlx.Tx, op string, sh shard, typ idcodec.Type, local uint64, ifVersion int64) (model.Doc, error) {
	r, d, err := readLive(ctx, tx, op, sh, typ, local, " FOR UPDATE")
	if err != nil {
		return nil, err
	}
	if ifVersion != 0 && r.version != ifVersion {
		return nil, model.Wrap(op, model.EVersion, "the object has changed (version "+itoa(r.version)+")", nil)
	}
	d.SetActive(false)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	d.SetActive(true)
	_, err = tx.ExecContext(ctx, "UPDATE "+sh.db+"."+objectTables[typ]+" SET doc = ?, version = version + 1, updated_at = ? WHERE local_id = ?", b, now(), local)
	return d, err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
