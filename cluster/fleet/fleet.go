// Package fleet holds what operators are shown of the fleet: each host
// and its ranges, replicas and lag, the servers registered in etcd and the
// map each routes by, a move in progress, the failover in progress or the
// last one, readiness checks, request rates and backups. store's Ops and the control plane (cluster/...) fill them
// in; the admin routes (/v1/admin/shard-map, /v1/admin/fleet, /readyz)
// serve them as JSON and pinstore shards prints them. Types only, no I/O;
// nothing here is a DSN, a password or a token.
package fleet

import "time"

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

	// RoundTrips is this server's traffic to the host, its master's first
	// and then its replicas' (on the fleet route only; absent elsewhere).
	RoundTrips []RoundTripStats `json:"round_trips,omitempty"`
}

// RoundTripStats is a server's round trips to one host in one role, from
// its own metrics (pinstore_shard_query_seconds and
// pinstore_shard_query_errors_total): Total and Errors count them since
// start (failed dials included), the rates are over the interval since
// the previous look (zero on the first), the p99 is since start.
type RoundTripStats struct {
	Role string `json:"role"` // master or replica
	RequestStats
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
	// Failover is the failover in progress, or the last one, as recorded
	// where the map lives; nil when none is recorded.
	Failover *FailoverStatus `json:"failover"`
	// FailoverError says why the failover's record could not be read.
	FailoverError string `json:"failover_error,omitempty"`
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

// FailoverStatus is a failover in progress, or the last one, as the
// failing-over tool (pinstore failover, or the elected server of a fleet
// with automatic failover) records it where the map lives: written when
// it starts (phase running) and when it ends (done or failed). A record
// left running by a tool that was killed stays so until the next
// failover.
type FailoverStatus struct {
	Host      string     `json:"host"`                 // as the map names it
	By        string     `json:"by"`                   // "pinstore failover", or "automatic (server <id>)"
	OldMaster string     `json:"old_master,omitempty"` // host:port; empty when the map could not be read
	NewMaster string     `json:"new_master,omitempty"` // host:port; empty until a replica is chosen
	Phase     string     `json:"phase"`                // running, done or failed
	Started   time.Time  `json:"started"`
	Finished  *time.Time `json:"finished"` // nil while running
	// DurationSeconds is from start to end; while running, so far (as of
	// the read).
	DurationSeconds float64 `json:"duration_seconds"`
	// WritesHeldSeconds is how long the host's ranges were read-only in
	// the map (writes waiting in the servers), once done.
	WritesHeldSeconds float64 `json:"writes_held_seconds,omitempty"`
	// OldMasterAnswered: the old master answered, was fenced, and the new
	// one applied all it had.
	OldMasterAnswered bool `json:"old_master_answered"`
	// PromotedAt is the new master's GTID position when promoted.
	PromotedAt string `json:"promoted_at,omitempty"`
	// Lost is how many acknowledged transactions of the old master the
	// new one lacks; nil when unknown (the old master did not answer, or
	// the failover did not get that far). LostNote says how it is known.
	Lost     *int64 `json:"lost"`
	LostNote string `json:"lost_note,omitempty"`
	// Unacknowledged counts the old master's transactions no replica
	// received, with semi-synchronous replication: never acknowledged.
	Unacknowledged int64          `json:"unacknowledged,omitempty"`
	Repointed      []string       `json:"repointed,omitempty"`     // replicas now replicating from the new master
	NotRepointed   []string       `json:"not_repointed,omitempty"` // replicas that could not be, with why
	MapVersion     string         `json:"map_version,omitempty"`   // the map naming the new master
	Steps          []FailoverStep `json:"steps"`
	Error          string         `json:"error,omitempty"` // why it failed or was refused
}

// FailoverStep is one step of a failover, in the order it ran: lock,
// read map, probe old master, probe replicas, freeze (the old master not
// answering: every replica's I/O thread stopped), choose, hold writes,
// fence old master (it answering), wait applied, promote, repoint, map
// rewrite; and give back (a refusal after writes were held: the I/O
// threads started again, the old master writable, the ranges writable).
type FailoverStep struct {
	Name    string    `json:"name"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Error   string    `json:"error,omitempty"` // the step the failover failed in
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
