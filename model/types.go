package model

import "github.com/pinstore/pinstore/idcodec"

// ObjectType declares one object type: what every package that stores,
// checks, patches, counts, hides or writes objects needs to know of it.
// The type's id and name are idcodec's; its document is a Go struct in
// model.go. What its delete removes follows from Members, Cascades and
// Drains; only product rules beyond them (saves, usernames, a section's
// pins staying on their board, a board's secret flag copied to its pins)
// are hooks keyed by the type in store (createRules, updateRules,
// deleteRules).
type ObjectType struct {
	Table    string      // its table in every shard database
	New      func() Doc  // an empty document of it
	Wire     []WireField // its documented members, in wire order
	Editable []string    // the members a patch may set
	// Counted lists the lists whose lengths an object carries, in the
	// order of Object.Counts; every one lives on the object's own shard,
	// so they are read with the object. SecretCounted are those of them
	// whose secret entries it also counts, apart.
	Counted, SecretCounted []Mapping
	// Owner, for a type whose objects can be secret, is the index in the
	// document's Refs of the user who owns it and alone (with service
	// tokens) sees it while it is secret; -1 for a type that is never
	// secret.
	Owner int
	// OwnerCached is set for a type whose owner (Refs[Owner]) the owner
	// cache holds (store.Owners, package ownercache): the API answers a
	// write's editor check from it rather than a read of the object when
	// the editor is the owner.
	OwnerCached bool
	// SecretFrom is the board's list through which an object inherits
	// its board's secret flag (every change of the flag rewrites the
	// objects on it); 0 for a type that does not inherit it.
	SecretFrom Mapping
	// Members are the lists an object is on, each kept on the object's
	// own shard (a pin's board's, owner's and section's lists): deleting
	// the object takes it off each in the delete's transaction, and a
	// secret object off the list's count of secret entries (when its
	// owner counts them, SecretCounted).
	Members []Member
	// Cascades are lists of the object's own (on its shard, no inverse)
	// whose objects are deleted with it, in the same transaction, as if
	// each were deleted by itself; the list goes too (a board's pins and
	// sections).
	Cascades []Mapping
	// Drains are lists of the object's own that its delete empties once
	// it has committed (marked in the transaction, so a crash never
	// leaves one half done): a list with an inverse loses each pair with
	// its other side (a pin's likers and saves, a user's follows and
	// likes); a list without one has its objects deleted (a user's
	// boards).
	Drains []Mapping

	// Parent is the list, among Members, under whose owner (the parent) a
	// new object is created: on the parent's shard, in a transaction that
	// reads the parent live (a board under its owner, a pin or a section
	// under its board, a comment under its pin); 0 for a type created
	// otherwise (a user, on a shard of its own: store.Usernames).
	Parent Mapping
	// ByHand is set when the Parent list's order is its owner's to set (a
	// board's sections): a new object goes last in it, at a place rather
	// than a time, and creates under one parent queue for it.
	ByHand bool
	// Adopt takes what a new object inherits from its parent as the
	// create's transaction read it (a pin's or a section's owner and
	// secret flag) and checks that actor (0: a service token) may create
	// it there; nil when there is nothing to take and anyone may.
	Adopt func(parent, doc Doc, actor ID) error
	// Live are the indexes in the document's Refs of the other objects a
	// new one names that must be live (a comment's author), read before
	// the create's transaction, since they may live on other shards.
	Live []int

	// Given are the ids a create's request names, in the order they are
	// checked (a board's owner_id, a pin's board_id and section_id, a
	// comment's pin_id and author_id); the rest of a create's body is
	// the Editable members.
	Given []Given

	// Collection is the segment of the type's URL paths:
	// /v1/{Collection}/{id}.
	Collection string
	// Editor is the index in the document's Refs of the user who alone
	// (with service tokens) may change or delete an object (a board's
	// owner, a comment's author); -1 for a type whose objects are users,
	// each its own editor.
	Editor int
	// Refusal is the 403 text a user token that is not the editor meets;
	// "" is "this {type} belongs to another user".
	Refusal string
}

// Member is a list an object is on: List, whose From object is the one
// Of names in the object's document (0: on no such list, as a pin in no
// section).
type Member struct {
	List Mapping
	Of   func(Doc) ID
}

// RefMember is the list m, whose From object is the document's Ref(i)
// (a pin's board is its Ref(0)).
func RefMember(m Mapping, i int) Member {
	return Member{m, func(d Doc) ID { return d.Ref(i) }}
}

// Given is an id a create's request names. Name is the document's
// member that holds it, an id of type Type. It comes from the request's
// path ({id}, the parent the create's route is under) when InPath, else
// from its body, where it is required unless Optional (a pin in no
// section). When Self is set, a user token may only name its own user
// there, and Self is the refusal it meets otherwise.
type Given struct {
	Name     string
	Type     idcodec.Type
	InPath   bool
	Optional bool
	Self     string
}

// WireField is one documented member of a type's wire form.
type WireField struct {
	Name    string // the member name, in stored documents and on the wire
	Default string // written when the document omits it; "" means required
	Kind    Kind   // what its value is
}

// Kind is what a wire field's value is: openapi.yaml describes each
// field by its kind (internal/specgen), and a kind's bounds are the ones
// its document's Validate checks.
type Kind uint8

// The kinds of wire fields.
const (
	KindID       Kind = iota + 1 // an object's id (model.ID)
	KindUsername                 // a username: 1 to MaxUsername bytes of [A-Za-z0-9_.-]
	KindName                     // a name: at most MaxName bytes of UTF-8
	KindText                     // a text: at most MaxText bytes of UTF-8
	KindURL                      // a URL: at most MaxURL bytes
	KindData                     // the client's own JSON object, at most Limits.MaxDataBytes
	KindFlag                     // a boolean
)

// MaxLen is the most bytes a value of a string kind may hold (MaxUsername,
// MaxName, MaxText, MaxURL); 0 for the other kinds.
func (k Kind) MaxLen() int {
	switch k {
	case KindUsername:
		return MaxUsername
	case KindName:
		return MaxName
	case KindText:
		return MaxText
	case KindURL:
		return MaxURL
	}
	return 0
}

// The object types, by idcodec type. A new type is its idcodec constant
// and name, its document struct, a row here, its migration and routes;
// a new list is a row in mapping.go and, in the row of the type it lists,
// a Member (and in its owner's, a Cascade or Drain if it is emptied).
var objectTypes = [...]ObjectType{
	idcodec.TypeUser: {
		Table:         "users",
		New:           func() Doc { return new(UserDoc) },
		Wire:          []WireField{{"username", "", KindUsername}, {"display_name", `""`, KindName}, {"data", "{}", KindData}},
		Editable:      []string{"username", "display_name", "data"},
		Counted:       []Mapping{UserFollowers, UserFollowing, UserBoards, UserPins},
		SecretCounted: []Mapping{UserBoards, UserPins},
		Owner:         -1,
		Drains:        []Mapping{UserFollowing, UserFollowers, UserLikes, UserBoards},
		Collection:    "users",
		Editor:        -1,
	},
	idcodec.TypeBoard: {
		Table:      "boards",
		New:        func() Doc { return new(BoardDoc) },
		Wire:       []WireField{{"owner_id", "", KindID}, {"name", "", KindName}, {"description", `""`, KindText}, {"data", "{}", KindData}, {"secret", "false", KindFlag}},
		Editable:   []string{"name", "description", "data", "secret"},
		Counted:    []Mapping{BoardPins, BoardSections},
		Owner:      0,
		Members:    []Member{RefMember(UserBoards, 0)},
		Parent:     UserBoards,
		Given:      []Given{{Name: "owner_id", Type: idcodec.TypeUser, Self: "a user token may only create boards for its own user"}},
		Cascades:   []Mapping{BoardPins, BoardSections},
		Collection: "boards",
		Editor:     0,
	},
	idcodec.TypePin: {
		Table: "pins",
		New:   func() Doc { return new(PinDoc) },
		Wire: []WireField{{"board_id", "", KindID}, {"owner_id", "", KindID}, {"link", `""`, KindURL}, {"description", `""`, KindText},
			{"image_url", `""`, KindURL}, {"data", "{}", KindData}, {"saved_from", "null", KindID}, {"section_id", "null", KindID}, {"secret", "false", KindFlag}},
		Editable:    []string{"link", "description", "image_url", "data"},
		Counted:     []Mapping{PinLikers, PinComments, PinSaves},
		Owner:       1,
		OwnerCached: true,
		SecretFrom:  BoardPins,
		Members: []Member{RefMember(BoardPins, 0), RefMember(UserPins, 1),
			{SectionPins, func(d Doc) ID { return d.(*PinDoc).SectionID }}},
		Parent: BoardPins,
		Given:  []Given{{Name: "board_id", Type: idcodec.TypeBoard}, {Name: "section_id", Type: idcodec.TypeSection, Optional: true}},
		Adopt: func(parent, d Doc, actor ID) error {
			b, p := parent.(*BoardDoc), d.(*PinDoc)
			p.OwnerID, p.Secret = b.OwnerID, b.Secret
			return b.addedBy(actor, "a user token may only pin on its own user's boards")
		},
		Drains:     []Mapping{PinLikers, PinSaves},
		Collection: "pins",
		Editor:     1,
	},
	idcodec.TypeComment: {
		Table:    "comments",
		New:      func() Doc { return new(CommentDoc) },
		Wire:     []WireField{{"pin_id", "", KindID}, {"author_id", "", KindID}, {"text", "", KindText}, {"data", "{}", KindData}},
		Editable: []string{"text", "data"},
		Owner:    -1,
		Members:  []Member{RefMember(PinComments, 0)},
		Parent:   PinComments,
		Adopt: func(parent, d Doc, _ ID) error {
			if p := parent.(*PinDoc); p.Secret && p.OwnerID != d.(*CommentDoc).AuthorID {
				return Errorf(ENotFound, "%s not found", idcodec.TypePin) // another user's secret pin: as if missing
			}
			return nil
		},
		Live: []int{1},
		Given: []Given{{Name: "pin_id", Type: idcodec.TypePin, InPath: true},
			{Name: "author_id", Type: idcodec.TypeUser, Self: "a user token may only comment as its own user"}},
		Collection: "comments",
		Editor:     1,
		Refusal:    "this comment is another user's",
	},
	idcodec.TypeSection: {
		Table:      "sections",
		New:        func() Doc { return new(SectionDoc) },
		Wire:       []WireField{{"board_id", "", KindID}, {"owner_id", "", KindID}, {"name", "", KindName}, {"data", "{}", KindData}, {"secret", "false", KindFlag}},
		Editable:   []string{"name", "data"},
		Counted:    []Mapping{SectionPins},
		Owner:      1,
		SecretFrom: BoardSections,
		Members:    []Member{RefMember(BoardSections, 0)},
		Parent:     BoardSections,
		ByHand:     true,
		Given:      []Given{{Name: "board_id", Type: idcodec.TypeBoard, InPath: true}},
		Adopt: func(parent, d Doc, actor ID) error {
			b, sec := parent.(*BoardDoc), d.(*SectionDoc)
			sec.OwnerID, sec.Secret = b.OwnerID, b.Secret
			return b.addedBy(actor, "a user token may only add sections to its own user's boards")
		},
		Collection: "sections",
		Editor:     1,
	},
}

// addedBy checks that actor (0: a service token) may add to the board b:
// another user's secret board is ENotFound, as if missing; their public
// one EForbidden with refusal.
func (b *BoardDoc) addedBy(actor ID, refusal string) error {
	switch {
	case actor == 0 || b.OwnerID == actor:
		return nil
	case b.Secret:
		return Errorf(ENotFound, "%s not found", idcodec.TypeBoard)
	}
	return Errorf(EForbidden, "%s", refusal)
}

// TypeSlots bounds every idcodec type that has a declaration: tables
// indexed by type have this length.
const TypeSlots = len(objectTypes)

// TypeOf returns typ's declaration; ok is false for a type that has none.
func TypeOf(typ idcodec.Type) (t *ObjectType, ok bool) {
	if int(typ) >= len(objectTypes) || objectTypes[typ].New == nil {
		return nil, false
	}
	return &objectTypes[typ], true
}

// ObjectTypes lists every declared type, in idcodec order.
func ObjectTypes() []idcodec.Type {
	var out []idcodec.Type
	for typ, t := range objectTypes {
		if t.New != nil {
			out = append(out, idcodec.Type(typ))
		}
	}
	return out
}

// Table is the table holding objects of typ in every shard ("" for a
// type that has no declaration).
func Table(typ idcodec.Type) string {
	if t, ok := TypeOf(typ); ok {
		return t.Table
	}
	return ""
}

// SecretOwner reports whether objects of typ can be secret and, if so,
// the index in their document's Refs of the user who owns them.
func SecretOwner(typ idcodec.Type) (ref int, ok bool) {
	if t, found := TypeOf(typ); found && t.Owner >= 0 {
		return t.Owner, true
	}
	return 0, false
}

// SecretCopies lists the board's lists whose objects carry the board's
// secret flag (ObjectType.SecretFrom): its pins and its sections.
func SecretCopies() []Mapping {
	var out []Mapping
	for _, t := range objectTypes {
		if t.SecretFrom != 0 {
			out = append(out, t.SecretFrom)
		}
	}
	return out
}
