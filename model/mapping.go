package model

import (
	"time"

	"github.com/pinstore/pinstore/idcodec"
)

// Mapping names one of the one-way, ordered lists between objects. A
// mapping row lives on the shard of its from id. A mapping with an inverse
// is written forward first, then inverse; the forward side is the source of
// truth that repair restores the inverse to.
type Mapping uint8

// The mappings. Their values index fixed tables; never reorder them.
const (
	UserBoards Mapping = iota + 1
	BoardPins
	UserPins
	UserFollowing
	UserFollowers
	UserLikes
	PinLikers
	PinComments
	PinSavedFrom
	PinSaves
	BoardSections // a board's sections, in the order its owner sets
	SectionPins   // the pins of a section (each pin in at most one section of its board)
)

type mappingInfo struct {
	table    string
	from, to idcodec.Type
	inverse  Mapping
	forward  bool   // the side written first and trusted by repair
	count    string // the name of the list's length among its owner's counts
	// viewer names, for a list whose rows are a viewer's state about the
	// objects it lists (a user's likes, a user's follows), that state on
	// the wire ("liked") and its verb ("like"); "" for every other list.
	viewer, verb string
	// segment is the list's path under its from object's URL
	// (/v1/{collection}/{id}/{segment}); "" for a list with no route.
	segment string
}

var mappings = [...]mappingInfo{
	UserBoards:    {"user_boards", idcodec.TypeUser, idcodec.TypeBoard, 0, true, "boards", "", "", "boards"},
	BoardPins:     {"board_pins", idcodec.TypeBoard, idcodec.TypePin, 0, true, "pins", "", "", "pins"},
	UserPins:      {"user_pins", idcodec.TypeUser, idcodec.TypePin, 0, true, "pins", "", "", "pins"},
	UserFollowing: {"user_following", idcodec.TypeUser, idcodec.TypeUser, UserFollowers, true, "following", "following", "follow", "following"},
	UserFollowers: {"user_followers", idcodec.TypeUser, idcodec.TypeUser, UserFollowing, false, "followers", "", "", "followers"},
	UserLikes:     {"user_likes", idcodec.TypeUser, idcodec.TypePin, PinLikers, true, "likes", "liked", "like", "likes"},
	PinLikers:     {"pin_likers", idcodec.TypePin, idcodec.TypeUser, UserLikes, false, "likes", "", "", "likers"},
	PinComments:   {"pin_comments", idcodec.TypePin, idcodec.TypeComment, 0, true, "comments", "", "", "comments"},
	PinSavedFrom:  {"pin_saved_from", idcodec.TypePin, idcodec.TypePin, PinSaves, true, "saved_from", "", "", ""},
	PinSaves:      {"pin_saves", idcodec.TypePin, idcodec.TypePin, PinSavedFrom, false, "saves", "", "", "saves"},
	BoardSections: {"board_sections", idcodec.TypeBoard, idcodec.TypeSection, 0, true, "sections", "", "", "sections"},
	SectionPins:   {"section_pins", idcodec.TypeSection, idcodec.TypePin, 0, true, "pins", "", "", "pins"},
}

// Counted lists the lists whose lengths an object of typ carries (a pin
// its likes, comments and saves, a board its pins and sections, a section
// its pins, a user their followers, following, boards and pins), in the
// order of Object.Counts (ObjectType.Counted). Every one lives on the
// object's own shard, so they are read with the object.
func Counted(typ idcodec.Type) []Mapping {
	if t, ok := TypeOf(typ); ok {
		return t.Counted
	}
	return nil
}

// SecretCounted lists the lists of Counted(typ) whose secret entries an
// object of typ also counts (a user's boards and pins), apart. Each is
// kept in the same shard transaction as the list (the list, its objects
// and their owner share a shard), so the owner sees the exact count and
// anyone else the count without them. Object.Counts holds, after the
// lengths of Counted(typ), the number of secret entries of each, in this
// order.
func SecretCounted(typ idcodec.Type) []Mapping {
	if t, ok := TypeOf(typ); ok {
		return t.SecretCounted
	}
	return nil
}

// CountKeys lists what an object of typ carries in Object.Counts, as the
// keys of its rows in a shard's mapping_counts: the mappings of
// Counted(typ), then the SecretKey of each of SecretCounted(typ). The
// slice is made once per type and shared: callers must not change it
// (every decode of a cached object asks for it).
func CountKeys(typ idcodec.Type) []uint8 {
	if int(typ) >= len(countKeys) {
		return nil
	}
	return countKeys[typ]
}

// countKeys is CountKeys of every type, from the declarations.
var countKeys = func() (all [TypeSlots][]uint8) {
	for typ := range all {
		var keys []uint8
		for _, m := range Counted(idcodec.Type(typ)) {
			keys = append(keys, uint8(m))
		}
		for _, m := range SecretCounted(idcodec.Type(typ)) {
			keys = append(keys, SecretKey(m))
		}
		all[typ] = keys[:len(keys):len(keys)]
	}
	return all
}()

// SecretKey is the mapping_counts key under which the number of secret
// entries of list m is kept: m with its high bit set, which no mapping
// has.
func SecretKey(m Mapping) uint8 { return uint8(m) | 0x80 }

// CountName names m's length among its owner's counts ("likes",
// "followers", …).
func (m Mapping) CountName() string { return mappings[m].count }

// Mappings lists every mapping, in table order.
func Mappings() []Mapping {
	out := make([]Mapping, 0, len(mappings)-1)
	for m := UserBoards; int(m) < len(mappings); m++ {
		out = append(out, m)
	}
	return out
}

// Valid reports whether m is a known mapping.
func (m Mapping) Valid() bool { return m >= UserBoards && int(m) < len(mappings) }

// Table is the mapping's table name in every shard.
func (m Mapping) Table() string { return mappings[m].table }

// String is the mapping's name, the same as its table.
func (m Mapping) String() string {
	if !m.Valid() {
		return "mapping(?)"
	}
	return mappings[m].table
}

// From and To are the object types the mapping links.
func (m Mapping) From() idcodec.Type { return mappings[m].from }
func (m Mapping) To() idcodec.Type   { return mappings[m].to }

// Inverse returns the inverse mapping and whether there is one.
func (m Mapping) Inverse() (Mapping, bool) { return mappings[m].inverse, mappings[m].inverse != 0 }

// Colocated reports whether m lists objects created under its from object,
// on that object's shard (a user's boards and pins, a board's pins and
// sections, a section's pins, a pin's comments): the mappings kept by creating and deleting objects, which have
// no inverse.
func (m Mapping) Colocated() bool { return m.Valid() && mappings[m].inverse == 0 }

// ViewerEdge is what m's row says of the object it lists, on the wire
// ("liked", "following"), for a list whose rows are a user's state about
// objects (a viewer edge); "" for any other list.
func (m Mapping) ViewerEdge() string { return mappings[m].viewer }

// Segment is m's path under its from object's URL: a list's page is
// GET /v1/{collection}/{id}/{segment} ("" for a list with no route).
func (m Mapping) Segment() string { return mappings[m].segment }

// Verb is what m's from object does to its to object ("like",
// "follow"), for a viewer edge; "" for any other list.
func (m Mapping) Verb() string { return mappings[m].verb }

// ViewerEdgeOf is the list whose rows say a viewer's state about objects
// of typ (likes for pins, follows for users).
func ViewerEdgeOf(typ idcodec.Type) (Mapping, bool) {
	for _, m := range Mappings() {
		if mappings[m].viewer != "" && m.To() == typ {
			return m, true
		}
	}
	return 0, false
}

// Forward reports whether m is the side written first (and trusted by
// repair) of an inverse pair; mappings without an inverse are forward.
func (m Mapping) Forward() bool { return mappings[m].forward }

// Page asks for one page of a list. Cursor and Offset are exclusive; Limit
// is 1..MaxLimit (0 means DefaultLimit). Desc lists newest (highest
// sequence) first. Since and Until, when not zero, keep the entries added
// at or after Since and before Until (a list's sequence is the time an
// entry was added, in milliseconds, unless the list was ordered by hand).
type Page struct {
	Limit  int
	Cursor string
	Offset int
	Desc   bool
	Since  time.Time
	Until  time.Time
}

// TimeRange reports whether p asks for a time range.
func (p Page) TimeRange() bool { return !p.Since.IsZero() || !p.Until.IsZero() }

// List limits.
const (
	DefaultLimit = 25
	MaxLimit     = 250
	MaxOffset    = 1_000_000
)

// Normalize applies the default limit and checks the bounds.
func (p *Page) Normalize() error {
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return Errorf(EInvalid, "limit must be between 1 and %d", MaxLimit)
	}
	if p.Offset < 0 || p.Offset > MaxOffset {
		return Errorf(EInvalid, "offset must be between 0 and %d", MaxOffset)
	}
	if p.Offset > 0 && p.Cursor != "" {
		return Errorf(EInvalid, "give either cursor or offset, not both")
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Since.Before(p.Until) {
		return Errorf(EInvalid, "since must be before until")
	}
	return nil
}

// Entry is one row of a mapping list.
type Entry struct {
	To       uint64
	Sequence int64
}

// List is one page of a mapping. NextCursor is empty on the last page.
type List struct {
	Entries    []Entry
	NextCursor string
	Count      int64 // the list's length (Store.List fills it; the feed has none)
	// Secret is how many of Count are secret (on secret boards), for the
	// lists whose secret entries are counted apart (SecretCounted); 0 for
	// every other list.
	Secret int64
}
