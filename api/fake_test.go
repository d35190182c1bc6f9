package api

import (
	"context"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// fakeStore is a Store whose methods the test sets; unset methods fail the
// call with an internal error that names them. Like the real store, a
// create validates its document (with limits; zero: the defaults) before
// anything else, and a refused document is not recorded as a call: calls
// lists what reached the store's I/O.
type fakeStore struct {
	limits  model.Limits
	get     func(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error)
	getMany func(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error)
	createB func(ctx context.Context, doc model.BoardDoc) (model.Object, error)
	createP func(ctx context.Context, doc model.PinDoc, actor uint64) (model.Object, error)
	createC func(ctx context.Context, doc model.CommentDoc) (model.Object, error)
	update  func(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func([]byte) ([]byte, error)) (model.Object, error)
	list    func(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, error)
	owners  func(ctx context.Context, pins []uint64) (map[uint64]uint64, error)
	ready   func(ctx context.Context) []fleet.Health
	calls   []string
}

var _ Store = (*fakeStore)(nil)

func unset(op string) error { return model.Wrap(op, model.EInternal, "", nil) }

func (f *fakeStore) note(op string) { f.calls = append(f.calls, op) }

func (f *fakeStore) UseKey(ctx context.Context) error {
	f.note("UseKey")
	return nil
}

func (f *fakeStore) CreateUser(ctx context.Context, doc model.UserDoc) (model.Object, error) {
	if err := doc.Validate(f.limits); err != nil {
		return model.Object{}, err
	}
	f.note("CreateUser")
	return model.Object{}, unset("CreateUser")
}

// Create answers as the store's create of each type did, under its
// name (CreateUser, CreateBoard, CreatePin, CreateSection, CreateComment).
func (f *fakeStore) Create(ctx context.Context, typ idcodec.Type, doc model.Doc, actor uint64) (model.Object, error) {
	switch d := doc.(type) {
	case *model.UserDoc:
		return f.CreateUser(ctx, *d)
	case *model.PinDoc:
		return f.CreatePin(ctx, *d, actor)
	case *model.BoardDoc:
		if err := d.Validate(f.limits); err != nil {
			return model.Object{}, err
		}
		f.note("CreateBoard")
		if f.createB != nil {
			return f.createB(ctx, *d)
		}
		return model.Object{}, unset("CreateBoard")
	case *model.CommentDoc:
		if err := d.Validate(f.limits); err != nil {
			return model.Object{}, err
		}
		f.note("CreateComment")
		if f.createC != nil {
			return f.createC(ctx, *d)
		}
		return model.Object{}, unset("CreateComment")
	}
	f.note("CreateSection")
	return model.Object{}, unset("CreateSection")
}
func (f *fakeStore) SavePin(ctx context.Context, source, board, actor uint64) (model.Object, bool, error) {
	f.note("SavePin")
	return model.Object{}, false, unset("SavePin")
}
func (f *fakeStore) CreatePin(ctx context.Context, doc model.PinDoc, actor uint64) (model.Object, error) {
	if err := doc.Validate(f.limits); err != nil {
		return model.Object{}, err
	}
	f.note("CreatePin")
	if f.createP != nil {
		return f.createP(ctx, doc, actor)
	}
	return model.Object{}, unset("CreatePin")
}
func (f *fakeStore) SetPinSection(ctx context.Context, pin, section uint64) (model.Object, error) {
	f.note("SetPinSection")
	return model.Object{}, unset("SetPinSection")
}
func (f *fakeStore) Get(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
	f.note("Get")
	if f.get != nil {
		return f.get(ctx, id, typ)
	}
	return model.Object{}, unset("Get")
}
func (f *fakeStore) GetMany(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error) {
	f.note("GetMany")
	if f.getMany != nil {
		return f.getMany(ctx, ids, typ)
	}
	return nil, unset("GetMany")
}
func (f *fakeStore) GetUserByUsername(ctx context.Context, name string) (model.Object, error) {
	f.note("GetUserByUsername")
	return model.Object{}, unset("GetUserByUsername")
}
func (f *fakeStore) HasMany(ctx context.Context, m model.Mapping, from uint64, tos []uint64) ([]bool, error) {
	f.note("HasMany")
	return nil, unset("HasMany")
}
func (f *fakeStore) HasManyLive(ctx context.Context, m model.Mapping, from uint64, tos []uint64) ([]bool, []model.Object, error) {
	f.note("HasManyLive")
	return nil, nil, unset("HasManyLive")
}
func (f *fakeStore) Update(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func(doc []byte) ([]byte, error)) (model.Object, error) {
	f.note("Update")
	if f.update != nil {
		return f.update(ctx, id, typ, ifVersion, mutate)
	}
	return model.Object{}, unset("Update")
}
func (f *fakeStore) Delete(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64) error {
	f.note("Delete")
	return unset("Delete")
}
func (f *fakeStore) AddMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	f.note("AddMapping")
	return unset("AddMapping")
}
func (f *fakeStore) RemoveMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	f.note("RemoveMapping")
	return unset("RemoveMapping")
}

// ListObjects is list, then GetMany of the page's entries, as the store
// does for lists whose objects live elsewhere.
func (f *fakeStore) ListObjects(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, []model.Object, error) {
	f.note("ListObjects")
	if f.list == nil {
		return model.List{}, nil, unset("ListObjects")
	}
	l, err := f.list(ctx, m, from, p)
	if err != nil || len(l.Entries) == 0 {
		return l, nil, err
	}
	ids := make([]uint64, len(l.Entries))
	for i, e := range l.Entries {
		ids[i] = e.To
	}
	objs, err := f.GetMany(ctx, ids, m.To())
	return l, objs, err
}

func (f *fakeStore) Move(ctx context.Context, m model.Mapping, from, item, before, after uint64) error {
	f.note("Move")
	return unset("Move")
}
func (f *fakeStore) Feed(ctx context.Context, user uint64, p model.Page) (model.List, error) {
	f.note("Feed")
	return model.List{}, unset("Feed")
}
func (f *fakeStore) Owners(ctx context.Context, pins []uint64) (map[uint64]uint64, error) {
	f.note("Owners")
	if f.owners != nil {
		return f.owners(ctx, pins)
	}
	return nil, unset("Owners")
}
func (f *fakeStore) ShardMapInfo(ctx context.Context) fleet.ShardMapInfo {
	f.note("ShardMapInfo")
	return fleet.ShardMapInfo{}
}
func (f *fakeStore) Ready(ctx context.Context) []fleet.Health {
	f.note("Ready")
	if f.ready != nil {
		return f.ready(ctx)
	}
	return nil
}

// storedFlags is the flags the store reads with an object whose document
// is doc (the row's flags column), for fakes that answer objects.
func storedFlags(typ idcodec.Type, doc []byte) model.Flags {
	d, err := model.DecodeDoc(typ, doc)
	if err != nil {
		return 0
	}
	return model.FlagsOf(d)
}
