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
}

var mappings = [...]mappingInfo{
	UserBoards:    {"user_boards", idcodec.TypeUser, idcodec.TypeBoard, 0, true, "boards", "", ""},
	BoardPins:     {"board_pins", idcodec.TypeBoard, idcodec.TypePin, 0, true, "pins", "", ""},
	UserPins:      {"user_pins", idcodec.TypeUser, idcodec.TypePin, 0, true, "pins", "", ""},
	UserFollowing: {"user_following", idcodec.TypeUser, idcodec.TypeUser, UserFollowers, true, "following", "following", "follow"},
	UserFollowers: {"user_followers", idcodec.TypeUser, idcodec.TypeUser, UserFollowing, false, "followers", "", ""},
	UserLikes:     {"user_likes", idcodec.TypeUser, idcodec.TypePin, PinLikers, true, "likes", "liked", "like"},
	PinLikers:     {"pin_likers", idcodec.TypePin, idcodec.TypeUser, UserLikes, false, "likes", "", ""},
	PinComments:   {"pin_comments", idcodec.TypePin, idcodec.TypeComment, 0, true, "comments", "", ""},
	PinSavedFrom:  {"pin_saved_from", idcodec.TypePin, idcodec.TypePin, PinSaves, true, "saved_from", "", ""},
	PinSaves:      {"pin_saves", idcodec.TypePin, idcodec.TypePin, PinSavedFrom, false, "saves", "", ""},
	BoardSections: {"board_sections", idcodec.TypeBoard, idcodec.TypeSection, 0, true, "sections", "", ""},
	SectionPins:   {"section_pins", idcodec.TypeSection, idcodec.TypePin, 0, true, "pins", "", ""},
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

// Health is one dependency's state as readiness checks report it.
type Health struct {
	Name     string `json:"name"`               // "mysql:<host name>", "shards:<host name>", "redis" or "topology"
	OK       bool   `json:"ok"`                 // it answered in time
	Disabled bool   `json:"disabled,omitempty"` // turned off by configuration: not asked, not needed (OK false)
	Error    string `json:"error,omitempty"`    // safe to show: no DSN, no password
	// Degrades marks a check whose failure leaves the server serving
	// (degraded, not unready): the topology, whose map the server keeps;
	// Redis, without which every request is served, only slower; shards
	// behind the newest migration or not recorded by migrate.
	Degrades bool `json:"degrades,omitempty"`
}

// ShardMapInfo is the shard map a server routes by, as the admin route
// shows it: no DSN, no password.
type ShardMapInfo struct {
	Version  string      `json:"version"`   // short hash of the map's canonical form
	Source   string      `json:"source"`    // the map file, the topology URL, or "PINSTORE_MYSQL_DSN"
	LoadedAt time.Time   `json:"loaded_at"` // when this version was put in force
	Shards   int         `json:"shards"`    // logical shard count
	DBPrefix string      `json:"db_prefix"` // shard N is database <prefix><N as %05d>
	Hosts    []HostInfo  `json:"hosts"`     // sorted by name
	Ranges   []RangeInfo `json:"ranges"`    // in shard order

	// With the topology in etcd: the map's etcd revision, whether this
	// server follows it (Stale says why not), and the servers registered.
	Revision int64        `json:"revision,omitempty"`
	Stale    string       `json:"stale,omitempty"`
	Servers  []ServerInfo `json:"servers,omitempty"`
	// ServersError says why Servers could not be read (etcd unreachable).
	ServersError string `json:"servers_error,omitempty"`
}

// ServerInfo is a running server as it registered itself in the
// topology: which map it routes by, and from which map on no write routed
// by an older one is still running on it.
type ServerInfo struct {
	ID          string    `json:"id"`
	Addr        string    `json:"addr"`
	Version     string    `json:"version"`
	MapRevision int64     `json:"map_revision"`
	Drained     string    `json:"drained"`
	Started     time.Time `json:"started"`
	Updated     time.Time `json:"updated"`
}

// HostInfo is one physical MySQL host of the map and whether it answers.
type HostInfo struct {
	Name    string `json:"name"`
	Addr    string `json:"addr"`              // host:port of the master
	Replica string `json:"replica,omitempty"` // host:port of the first replica, if any (as before Replicas)
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`

	// GTIDPosition is the master's @@gtid_binlog_pos, when it answered.
	GTIDPosition string `json:"gtid_position,omitempty"`
	// SemiSync says whether the master waits for a replica's
	// acknowledgement before a commit returns (semi-synchronous
	// replication on, and not fallen back to asynchronous).
	SemiSync bool `json:"semi_sync"`
	// ReplicaReads says whether reads may go to its replicas.
	ReplicaReads bool          `json:"replica_reads"`
	Replicas     []ReplicaInfo `json:"replicas,omitempty"`
}

// ReplicaInfo is one replica of a host, as it answered a probe.
type ReplicaInfo struct {
	Addr string `json:"addr"` // host:port
	OK   bool   `json:"ok"`   // it answered
	// Replicating: both replication threads run, from the host's master.
	Replicating bool   `json:"replicating"`
	IOThread    string `json:"io_thread,omitempty"`  // Yes, No or Connecting
	SQLThread   string `json:"sql_thread,omitempty"` // Yes or No
	// GTIDPosition is what it has applied (@@gtid_slave_pos).
	GTIDPosition string `json:"gtid_position,omitempty"`
	// Behind is how many of the master's transactions it had not applied
	// when probed (from the two GTID positions).
	Behind uint64 `json:"transactions_behind"`
	// SecondsBehindMaster is MariaDB's own estimate, absent when unknown.
	SecondsBehindMaster *int64 `json:"seconds_behind_master,omitempty"`
	// LagMS is the server's measure (package replicas): no write
	// acknowledged on the master more than this many milliseconds ago is
	// missing from the replica. Absent where no server measures it (the
	// pinstore shards command) or while the master is not answering.
	LagMS *int64 `json:"lag_ms,omitempty"`
	// ServesReads: this server would send a read without a token to it now.
	ServesReads bool   `json:"serves_reads"`
	SemiSync    bool   `json:"semi_sync"` // its replication acknowledges semi-synchronously
	Error       string `json:"error,omitempty"`
}

// RangeInfo is one inclusive range of shards and where it lives.
type RangeInfo struct {
	First    int    `json:"first"`
	Last     int    `json:"last"`
	Host     string `json:"host"`
	Open     bool   `json:"open"`      // new users may be placed here
	ReadOnly bool   `json:"read_only"` // writes refused (being moved)
}

// FleetStatus is what the fleet page shows: the shard map with its hosts,
// ranges, replicas and registered servers (ShardMapInfo), the move in
// progress, the last failover, this server's request rates and each
// host's last backup. No DSN, no password, no token.
type FleetStatus struct {
	ShardMapInfo
	// Server is the address of the server that answered.
	Server string `json:"server"`
	// Move is the move in progress; nil when none is recorded.
	Move *MoveStatus `json:"move"`
	// MoveError says why the move's state could not be read.
	MoveError string `json:"move_error,omitempty"`
	// LastRewrite is the note the last tool to rewrite the map left at
	// its top ("Rewritten by pinstore failover (…) at …"): a failover, a
	// move's step; empty when the map carries none.
	LastRewrite string `json:"last_rewrite,omitempty"`
	// Requests is this server's traffic, from its own metrics.
	Requests RequestStats `json:"requests"`
	// WriteBuffer is the writes this server holds for a move's switch or
	// a failover's new master, and those that ran out of time.
	WriteBuffer WriteBufferStats `json:"write_buffer"`
	// Backups is each host's last backup, with serve --backups; empty
	// otherwise.
	Backups []BackupStatus `json:"backups"`
}

// MoveStatus is a move in progress as the mover records it in the
// Home's lock, with the progress of its current pass.
type MoveStatus struct {
	Range   string    `json:"range"` // "first-last"
	To      string    `json:"to"`    // target host
	From    []string  `json:"from"`  // "shards on host" where the range was when it began
	Phase   string    `json:"phase"` // copy, hold, switched, aborted, reverting or finishing
	Started time.Time `json:"started"`
	Note    string    `json:"note,omitempty"`
	Copied  bool      `json:"copied"` // the first pass is done
	// Progress is the last progress the mover recorded; nil before its
	// first report.
	Progress *MoveProgress `json:"progress"`
}

// MoveProgress is a pass of a move over its shards.
type MoveProgress struct {
	Pass        string    `json:"pass"` // "copy", "catch up", …
	ShardsDone  int64     `json:"shards_done"`
	Shards      int64     `json:"shards"`
	Rows        int64     `json:"rows"`
	RowsTotal   int64     `json:"rows_total"` // the sources' estimate; 0: unknown
	RowsPerSec  float64   `json:"rows_per_second"`
	SecondsLeft *float64  `json:"seconds_left"` // nil: unknown
	Updated     time.Time `json:"updated"`
}

// RequestStats is a server's HTTP traffic: rates over the interval since
// the previous look (zero on the first) and the p99 latency since start.
type RequestStats struct {
	Total         float64 `json:"total"`
	Errors        float64 `json:"errors"` // 5xx
	RatePerSec    float64 `json:"rate_per_second"`
	ErrorsPerSec  float64 `json:"errors_per_second"`
	P99Seconds    float64 `json:"p99_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
}

// WriteBufferStats is the write buffer of a server.
type WriteBufferStats struct {
	Waiting float64 `json:"waiting"`
	Waited  float64 `json:"waited_total"`
	Expired float64 `json:"expired_total"`
}

// BackupStatus is a host's last backup as the server's backup loop
// reports it.
type BackupStatus struct {
	Host string `json:"host"`
	// LastGoodAgeSeconds is the age of the last verified backup; nil
	// when none was verified.
	LastGoodAgeSeconds *float64 `json:"last_good_age_seconds"`
	LastAgeSeconds     *float64 `json:"last_age_seconds"`
}
